"""The one pipeline (``Speaker``): its audio is the runtime's for the same tokens, style row and seed;
streamed chunks make the one-shot speech; `say --subtitles` gives the same samples as `say` in every
language family, with subtitles whose words are the text's words."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kokoro_tvm_ext.errors import InvalidInputError

pytestmark = pytest.mark.model

SPEED = 10.0  # random weights speak ~25 frames per token at speed 1: keep the audio short
TEXT = "Hello there, my friend. See you soon! It is a fine day."


@pytest.fixture(scope="module")
def speaker(small_artifact):
    from kokoro_tvm_ext.speech import Speaker

    return Speaker.load(small_artifact)


def test_speech_equals_the_runtime_on_the_same_tokens_style_and_seed(speaker):
    """One sentence not cut early is one chunk: G2P -> vocab ids -> style row len-1 -> synthesize(seed), by hand."""
    from kokoro_tvm_ext.speech import load_config, load_voice, phonemize

    text = "Hello there, my friend."
    vocab = load_config()["vocab"]
    ids = np.array([vocab[c] for c in phonemize(text, "a") if c in vocab], np.int64)
    style = load_voice("af_heart")[len(ids) - 1]
    expected, durations = speaker.model.synthesize(ids, style, speed=SPEED, noise_seed=7)
    speech = speaker.speak(text, "af_heart", speed=SPEED, seed=7, first_chunk_tokens=None)
    # The random weights' audio ends loud, so its last 30 ms fade out (speech/edges.py); the rest is the runtime's.
    fade = 720
    np.testing.assert_array_equal(speech.audio[:-fade], expected[:-fade])
    ramp = np.cos(np.linspace(0, np.pi / 2, fade)) ** 2
    np.testing.assert_allclose(speech.audio[-fade:], expected[-fade:] * ramp, rtol=1e-5, atol=1e-7)
    assert speech.sample_rate == 24000
    assert [w.word for w in speech.words] == ["Hello", "there", ",", "my", "friend", "."]
    assert speech.words[-1].end_time == pytest.approx(int(durations[:-1].sum()) * 600 / 24000)


def test_streamed_chunks_make_the_one_shot_speech(speaker):
    chunks = list(speaker.stream(TEXT, "af_heart", speed=SPEED, seed=3))
    # One sentence per chunk (the first too short to be cut after its first clause).
    assert [c.text for c in chunks] == ["Hello there, my friend.", "See you soon!", "It is a fine day."]
    whole = speaker.speak(TEXT, "af_heart", speed=SPEED, seed=3)
    np.testing.assert_array_equal(np.concatenate([c.audio for c in chunks]), whole.audio)
    assert [w for c in chunks for w in c.words] == whole.words
    starts = np.cumsum([0] + [len(c.audio) for c in chunks[:-1]]) / 24000
    np.testing.assert_allclose([c.start for c in chunks], starts)
    for c in chunks:  # every chunk's words lie inside its own audio
        assert c.start <= c.words[0].start_time and c.words[-1].end_time <= c.start + len(c.audio) / 24000 + 1e-9


def test_each_chunk_of_a_plan_equals_its_solo_run(speaker):
    """The chunks of a plan run as one batch; each equals its solo synthesis with its own seed, its edges cut as
    planned."""
    plan = speaker.plan(TEXT, "af_heart", speed=SPEED, seed=5)
    assert [c.seed for c in plan.chunks] == [5, 6, 7]
    for chunk in speaker.run(plan):
        p = plan.chunks[chunk.index]
        solo, _ = speaker.model.synthesize(p.tokens, p.style, speed=SPEED, noise_seed=p.seed)
        np.testing.assert_array_equal(chunk.audio, chunk.cut.apply(solo))
        assert len(chunk.audio) == len(solo) or p.lead is not None or p.tail is not None


def test_phonemes_speak_without_words(speaker):
    speech = speaker.speak(phonemes="həlˈO wˈɜɹld", voice="af_heart", speed=SPEED)
    assert speech.audio.size > 0 and speech.words == []


def test_a_voice_carries_its_language(speaker):
    from kokoro_tvm_ext.speech import Voice

    assert speaker.voice("ff_siwis").lang == "f"
    assert speaker.voice("ff_siwis", lang="en-us").lang == "a"
    assert Voice.load("jf_alpha+af_heart").lang == "j"  # a blend speaks its first voice's language
    french = speaker.plan("Nous avons marché le long de la rivière.", "ff_siwis", speed=SPEED)
    english = speaker.plan("Nous avons marché le long de la rivière.", "ff_siwis", lang="en-us", speed=SPEED)
    assert french.chunks[0].phonemes != english.chunks[0].phonemes


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"text": "   "}, "text is empty"),
        ({"text": "Hi.", "phonemes": "hˈI"}, "not both"),
        ({"text": "Hi.", "speed": 0}, "speed must be between"),
        ({"text": "Hi.", "speed": "fast"}, "speed must be a number"),
        ({"text": "Hi.", "lang": "xx"}, "unknown language"),
        ({"text": "😀 ☃"}, "nothing to pronounce in American English"),
        ({"text": "Hello \ud800 world."}, "position 6: U\\+D800, a lone surrogate"),
        ({"phonemes": "  "}, "phonemes are empty"),
    ],
)
def test_bad_input_is_an_input_error_before_any_synthesis(speaker, kwargs, message):
    kwargs.setdefault("voice", "af_heart")
    with pytest.raises(InvalidInputError, match=message):
        speaker.plan(**kwargs)


SENTENCES = {
    "ff_siwis": "Nous avons marché le long de la rivière. Il fait beau aujourd'hui.",
    "jf_alpha": "今日はいい天気ですね。散歩に行きましょう。",
    "hf_alpha": "नमस्ते दुनिया। आज मौसम अच्छा है।",
}


def _letters(text: str) -> str:
    """The text without spaces and punctuation, for comparing words across scripts."""
    return re.sub(r"[\s\W]", "", text)


@pytest.mark.integration
@pytest.mark.parametrize("voice", list(SENTENCES))
def test_subtitles_never_change_the_audio(small_artifact, tmp_path, voice):
    sf = pytest.importorskip("soundfile")
    from kokoro_tvm_ext.cli import main

    text = SENTENCES[voice]
    common = [text, "--voice", voice, "--artifact", str(small_artifact), "--speed", str(SPEED)]
    assert main(["say", *common, "-o", str(tmp_path / "plain.wav")]) == 0
    srt = tmp_path / "sub.srt"
    assert main(["say", *common, "-o", str(tmp_path / "sub.wav"), "--subtitles", str(srt)]) == 0
    plain, _ = sf.read(tmp_path / "plain.wav", dtype="int16")
    subtitled, _ = sf.read(tmp_path / "sub.wav", dtype="int16")
    np.testing.assert_array_equal(plain, subtitled)
    cues = re.findall(r"\d+\n[\d:,]+ --> [\d:,]+\n(.+)\n", srt.read_text())
    assert cues and _letters("".join(cues)) == _letters(text)
