"""Pronunciation overrides, pause tags and the user lexicon, planned by the one pipeline (``Speaker.plan``):
an override or a lexicon entry changes exactly its word's phonemes, in each G2P family; bad markup and
bad lexicon lines are one InvalidInputError naming them. Planning only: the model is never called."""

from __future__ import annotations

import pytest
from plan_only import NoModel

from kokoro_tvm_ext.errors import InvalidInputError
from kokoro_tvm_ext.speech import Speaker
from kokoro_tvm_ext.speech.lexicon import Lexicon
from kokoro_tvm_ext.speech.markup import Span


@pytest.fixture(scope="module")
def speaker():
    return Speaker(NoModel())


def words(plan) -> list[tuple[str, str]]:
    return [(w.text, w.phonemes) for c in plan.chunks for w in c.words]


# (voice, text with one word overridden, that word, the phonemes given)
OVERRIDES = [
    ("af_heart", "I really like [Kokoro](/kˈOkəɹO/) a lot.", "Kokoro", "kˈOkəɹO"),
    ("ff_siwis", "Je parle avec [Kokoro](/kˈOkəɹO/) ce soir.", "Kokoro", "kˈOkəɹO"),
    ("ef_dora", "Hay [muchos](/mˈutʃos/) perros aquí.", "muchos", "mˈutʃos"),
    ("jf_alpha", "私は[東京](/tokjo/)に行きます。", "東京", "tokjo"),
    ("zf_xiaobei", "我爱[北京](/pei tɕiŋ/)。", "北京", "pei tɕiŋ"),
]


@pytest.mark.parametrize("voice, text, word, phonemes", OVERRIDES, ids=[o[0][0] for o in OVERRIDES])
def test_an_override_changes_exactly_its_word(speaker, voice, text, word, phonemes):
    plain = words(speaker.plan(text.replace(f"[{word}](/{phonemes}/)", word), voice))
    overridden = words(speaker.plan(text, voice))
    assert [t for t, _ in overridden] == [t for t, _ in plain]  # the word keeps its place and written text
    changed = [i for i, (a, b) in enumerate(zip(plain, overridden)) if a != b]
    assert changed == [next(i for i, (t, _) in enumerate(plain) if t == word)]
    assert overridden[changed[0]] == (word, phonemes)
    assert plain[changed[0]][1] != phonemes


def test_an_override_of_several_words_is_one_word(speaker):
    plan = speaker.plan("See [the list](/ðə lˈɪst/) here.", "af_heart")
    assert ("the list", "ðə lˈɪst") in words(plan)
    assert "ðə lˈɪst" in plan.chunks[0].phonemes


def test_brackets_that_are_not_markup_stay_text(speaker):
    texts = [t for t, _ in words(speaker.plan("He said [sic] it twice [1].", "af_heart"))]
    assert "sic" in texts and "1" in texts


@pytest.mark.parametrize(
    "text, message",
    [
        ("Wait [pause:abc] here.", r"pause tag \[pause:abc\] has no length"),
        ("Wait [pause:-1s] here.", r"pause tag \[pause:-1s\] has no length"),
        ("Wait [pause:0s] here.", r"pause tag \[pause:0s\] must be longer than 0"),
        ("Wait [pause:11s] here.", r"pause tag \[pause:11s\] must be longer than 0 and at most 10 s"),
        ("Say [Kokoro](/kˈO9ko/) now.", r"override \[Kokoro\]\(/kˈO9ko/\) has characters .*'9' \(U\+0039\)"),
        ("Say [Kokoro](/ /) now.", r"override \[Kokoro\]\(/ /\) has no phonemes"),
    ],
)
def test_bad_markup_is_named(speaker, text, message):
    with pytest.raises(InvalidInputError, match=message):
        speaker.plan(text, "af_heart")


@pytest.mark.parametrize(
    "tag, samples", [("[pause:1s]", 24000), ("[pause:500ms]", 12000), ("[pause:0.25]", 6000), ("[PAUSE: 2 s]", 48000)]
)
def test_a_pause_is_a_chunk_of_silence_between_the_text_around_it(speaker, tag, samples):
    plan = speaker.plan(f"Hello there, my friend. {tag} See you soon.", "af_heart", seed=7)
    assert [c.pause_samples for c in plan.chunks] == [0, samples, 0]
    assert [c.text for c in plan.chunks] == ["Hello there, my friend.", "", "See you soon."]
    assert plan.chunks[1].tokens.size == 0
    assert [c.seed for c in plan.chunks if not c.is_pause] == [7, 8]  # a pause takes no seed


def test_a_text_of_pauses_only_is_silence(speaker):
    plan = speaker.plan("[pause:1s] [pause:0.5s]", "af_heart")
    assert [c.pause_samples for c in plan.chunks] == [24000, 12000]


LEXICON = "\n".join(
    [
        "# a comment, then a blank line",
        "",
        "en-us\tkokoro\t/kˈOkəɹO/",
        "a,b\tUS\tjˌuˈɛs",
        "fr\tKokoro\tkˈOkəɹO",
        "zh\t北京\tpei tɕiŋ",
    ]
)


def test_the_lexicon_wins_over_the_g2p(speaker):
    lexicon = Lexicon.parse(LEXICON, "test.tsv")
    plan = speaker.plan("KOKORO and Kokoro live in the US with us.", "af_heart", lexicon=lexicon)
    got = dict(words(plan))
    assert got["KOKORO"] == got["Kokoro"] == "kˈOkəɹO"  # a lowercase entry matches any case
    assert got["US"] == "jˌuˈɛs"
    assert got["us"] != "jˌuˈɛs"  # an entry with capitals matches only as written
    assert dict(words(speaker.plan("Je parle avec Kokoro.", "ff_siwis", lexicon=lexicon)))["Kokoro"] == "kˈOkəɹO"
    assert dict(words(speaker.plan("我爱北京。", "zf_xiaobei", lexicon=lexicon)))["北京"] == "pei tɕiŋ"
    # an inline override wins over the lexicon
    inline = speaker.plan("I like [Kokoro](/kˈOkO/).", "af_heart", lexicon=lexicon)
    assert dict(words(inline))["Kokoro"] == "kˈOkO"


def test_a_speaker_lexicon_from_a_file(tmp_path):
    path = tmp_path / "lexicon.tsv"
    path.write_text(LEXICON, encoding="utf-8")
    speaker = Speaker(NoModel(), lexicon=path)
    assert dict(words(speaker.plan("Hello Kokoro.", "af_heart")))["Kokoro"] == "kˈOkəɹO"


@pytest.mark.parametrize(
    "line, message",
    [
        ("en-us Kokoro kˈOkəɹO", r"test.tsv:3: expected language<TAB>word<TAB>phonemes, found no tab"),
        ("en-us\tKokoro", r"test.tsv:3: expected language<TAB>word<TAB>phonemes, found 2 fields"),
        ("xx\tKokoro\tkˈOkəɹO", r"test.tsv:3: unknown language 'xx'; known languages: a \(en-us"),
        ("en-us\tKokoro\tkˈO9ko", r"test.tsv:3: the phonemes of 'Kokoro' has characters .*'9' \(U\+0039\)"),
        ("en-us\t\tkˈOkəɹO", r"test.tsv:3: the word is empty"),
        ("en-us\tBob\tbˈɑb", r"test.tsv:3: 'Bob' is already in the lexicon for American English \(line 2\)"),
    ],
)
def test_a_bad_lexicon_line_is_named(line, message):
    with pytest.raises(InvalidInputError, match=message):
        Lexicon.parse(f"# header\nen-us\tBob\tbˈɑb\n{line}\n", "test.tsv")


def test_a_lexicon_pickles_for_ray_workers():
    import pickle

    lexicon = Lexicon.parse(LEXICON)
    lexicon.apply([Span(("US",), "a")])  # its patterns built
    again = pickle.loads(pickle.dumps(lexicon))
    assert again.entries == lexicon.entries and again.digest == lexicon.digest
    assert again.lookup("Kokoro", "a") == "kˈOkəɹO"


def test_say_with_a_bad_lexicon_exits_2_with_one_line(tmp_path, capsys):
    from kokoro_tvm_ext.cli import main

    bad = tmp_path / "bad.tsv"
    bad.write_text("en-us\tKokoro\tkˈOkəɹO\nfrench\tKokoro\tkokoʁo\n", encoding="utf-8")
    code = main(["say", "Hello Kokoro.", "-o", str(tmp_path / "out.wav"), "--lexicon", str(bad)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and f"{bad}:2: unknown language 'french'" in err
    assert not (tmp_path / "out.wav").exists()


def test_speaker_load_reads_the_lexicon_before_anything_slow(tmp_path):
    with pytest.raises(InvalidInputError, match="no such file"):
        Speaker.load(tmp_path / "no-artifact", lexicon=tmp_path / "missing.tsv")


def test_phonemize_reads_overrides_too():
    from kokoro_tvm_ext.speech import phonemize

    assert phonemize("Hola [amigo](/amˈiɡo/).", "es") == "ˈola amˈiɡo."
    assert phonemize("Hola amigo.", "es") == "ˈola amˈiɣo."


@pytest.mark.model
def test_a_pause_is_exact_silence_and_shifts_the_timings_after_it(small_artifact):
    """The same plan without the pause, with 24000 zeros between its chunks: the seeds are as without the
    pause, the words after it exactly 1 s later; the server's batches (``synthesize``) keep pauses in order."""
    import numpy as np

    from kokoro_tvm_ext.speech.subtitles import cues

    real = Speaker.load(small_artifact)
    before, after = "Hello there, my friend.", "See you [soon](/sˈun/)."
    speech = real.speak(f"{before} [pause:1s] {after}", "af_heart", speed=10.0, seed=3)
    # "Hello there, my friend.", "See you soon.": seeds 3, 4, one batch (the random weights' noise has no silent
    # edges to cut: a sentence's chunks are the same after a pause as after the sentence before)
    *firsts, second = real.stream(f"{before} {after}", "af_heart", speed=10.0, seed=3)
    first_words = [w for c in firsts for w in c.words]
    silence = np.zeros(24000, np.float32)
    np.testing.assert_array_equal(speech.audio, np.concatenate([*(c.audio for c in firsts), silence, second.audio]))
    assert len(firsts) == 1 and all(len(c.audio) > 0 for c in [*firsts, second])
    assert speech.words[: len(first_words)] == first_words
    later = speech.words[len(first_words) :]
    assert [w.word for w in later] == ["See", "you", "soon", "."]
    assert [w.start_time for w in later] == pytest.approx([w.start_time + 1 for w in second.words], abs=1e-9)
    assert [w.end_time for w in later] == pytest.approx([w.end_time + 1 for w in second.words], abs=1e-9)

    # Subtitles read the text back, spaces included, across the pause and inside a sentence.
    assert " ".join(text for _, _, text in cues(speech.words)) == "Hello there, my friend. See you soon."
    cut = real.speak("Hello [pause:0.2s] from Kokoro.", "af_heart", speed=10.0)
    assert [text for _, _, text in cues(cut.words)] == ["Hello from Kokoro."]

    plan = real.plan(f"[pause:0.5s] {before} [pause:1s]", "af_heart", speed=10.0, seed=3, first_chunk_tokens=None)
    out = list(real.synthesize(plan.chunks + plan.chunks[:1]))
    solo, _ = real.model.synthesize(plan.chunks[1].tokens, plan.chunks[1].style, speed=10.0, noise_seed=3)
    assert [len(a) for a, _ in out] == [12000, len(solo), 24000, 12000]
    np.testing.assert_array_equal(out[1][0], solo)
    assert not any(a.any() for i, (a, _) in enumerate(out) if i != 1)
