"""Japanese and Mandarin subtitles read as the text is written: no space between words where the text has none,
the input's punctuation (。、！？「」) and digits kept; each word keeps its own times. English and French cues as
they were."""

from __future__ import annotations

import re

import pytest

from kokoro_tvm_ext.speech.chunks import Chunk, text_chunks
from kokoro_tvm_ext.speech.subtitles import render
from kokoro_tvm_ext.speech.tokens import default_vocab

pytest.importorskip("misaki")

SPEED = 10.0  # random weights speak ~25 frames per token at speed 1: keep the audio short
JAPANESE = ["今日はいい天気ですね。", "「Kokoro は速い」と彼は言った！", "TVMで動く？", "3つあります。"]
MANDARIN = ["今天天气很好。", "我们去公园吧！", "你好，世界？", "2024年有365天。", "我用 TVM 跑模型。"]


def written(words) -> str:
    """Words joined as subtitles join them."""
    return "".join(w.text + (" " if w.text_space else "") for w in words).strip()


@pytest.mark.parametrize("lang, sentence", [*(("j", s) for s in JAPANESE), *(("z", s) for s in MANDARIN)])
def test_words_are_the_sentence_as_written(lang, sentence):
    """Sliced from the input: the space in 「Kokoro は速い」 stays, none appears in 「TVMで動く」, ！ is not !."""
    chunks = [c for c in text_chunks(sentence, lang, default_vocab()) if isinstance(c, Chunk)]
    words = [w for c in chunks for w in c.words]
    assert written(words) == sentence
    assert len(words) > 2 and all(w.text for w in words)  # still one entry per word, for highlighting


@pytest.mark.parametrize("lang, sentence", [("j", "ｶﾞｷﾞｸﾞです。"), ("j", "①と②です。"), ("z", "温度是-3.5℃，50%的人。")])
def test_text_read_otherwise_is_still_the_text_as_written(lang, sentence):
    """Half-width kana composed, ① read as 1, ℃ as 摄氏度: the run is matched up to the next character that
    reads the same, so the words still join to the input."""
    chunks = [c for c in text_chunks(sentence, lang, default_vocab()) if isinstance(c, Chunk)]
    assert written(w for c in chunks for w in c.words) == sentence


def srt_cues(text: str) -> list[tuple[str, str, str]]:
    return re.findall(r"\d+\n(\S+) --> (\S+)\n(.+)\n", text)


@pytest.fixture(scope="module")
def speaker(small_artifact):
    from kokoro_tvm_ext.speech import Speaker

    return Speaker.load(small_artifact)


@pytest.mark.parametrize("voice, sentences", [("jf_alpha", JAPANESE), ("zf_xiaobei", MANDARIN)])
def test_srt_and_vtt_cues_are_the_input_sentences(speaker, voice, sentences):
    speech = speaker.speak("".join(sentences), voice, speed=SPEED)
    assert [text for _, _, text in srt_cues(render(speech.words, ".srt"))] == sentences
    vtt = render(speech.words, ".vtt")
    assert vtt.startswith("WEBVTT\n") and re.findall(r"--> \S+\n(.+)\n", vtt) == sentences
    times = [(w.start_time, w.end_time) for w in speech.words]
    assert all(start <= end for start, end in times)
    assert all(a[1] <= b[0] + 1e-9 for a, b in zip(times, times[1:]))  # monotonic, never overlapping


def test_markup_is_removed_and_the_text_around_it_kept(speaker):
    speech = speaker.speak("今日は[天気](/teŋki/)がいい。[pause:0.1s]明日も。", "jf_alpha", speed=SPEED)
    assert [text for _, _, text in srt_cues(render(speech.words, ".srt"))] == ["今日は天気がいい。", "明日も。"]


def test_a_long_cjk_sentence_breaks_into_cues_between_words(speaker):
    sentence = "今日はとてもいい天気なので、私たちは公園へ散歩に行って、それから駅前の喫茶店でコーヒーを飲みました。"
    speech = speaker.speak(sentence, "jf_alpha", speed=SPEED)
    cues = [text for _, _, text in srt_cues(render(speech.words, ".srt"))]
    assert len(cues) > 1 and "".join(cues) == sentence


# What the cues read before Japanese and Mandarin were joined as written: languages with spaces keep them
# byte for byte (the French quotes are espeak's words, as they were).
SPACED = [
    (
        "af_heart",
        "Hello there, my friend. See you soon! It is a fine day, isn't it? "
        'Dr. Smith paid $5.50 for "TVM" (really) — yes.',
        [
            "Hello there, my friend.",
            "See you soon!",
            "It is a fine day, isn't it?",
            'Dr. Smith paid $5.50 for "TVM" (really)',
            "— yes.",
        ],
    ),
    (
        "af_heart",
        "Hello [Kokoro](/kˈOkəɹO/) world. A very long sentence that should be cut into more than one cue "
        "because it is longer than forty-two characters.",
        [
            "Hello Kokoro world.",
            "A very long sentence that should be cut into",
            "more than one cue because it is longer than",
            "forty-two characters.",
        ],
    ),
    (
        "ff_siwis",
        "Nous avons marché jusqu'à la gare. « Bonjour », dit-il !",
        ["Nous avons marché jusqu'à la gare.", "“ Bonjour ”, dit-il !"],
    ),
]


@pytest.mark.parametrize("voice, text, want", SPACED)
def test_cues_of_languages_with_spaces_are_unchanged(speaker, voice, text, want):
    speech = speaker.speak(text, voice, speed=SPEED)
    cues = srt_cues(render(speech.words, ".srt"))
    assert [c[2] for c in cues] == want
