"""Hostile text at the entry of the speech pipeline (``Speaker.plan``): every input gets a plan or one of
our errors (never another exception), in time linear in its length, and a server can cancel planning."""

from __future__ import annotations

import threading
import time
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from kokoro_tvm_ext.errors import (
    InvalidInputError,
    InvalidVoiceError,
    KokoroError,
    RequestCancelled,
)
from kokoro_tvm_ext.model.spec import MAX_TOKENS, STYLE_DIM, VOICE_PACK_ROWS
from kokoro_tvm_ext.speech.g2p import espeak
from kokoro_tvm_ext.speech.languages import LANGUAGES
from kokoro_tvm_ext.speech.speaker import Speaker, Voice
from kokoro_tvm_ext.speech.text_checks import MAX_NUMBER_DIGITS
from kokoro_tvm_ext.speech.voices import parse_voice_spec

pytest.importorskip("misaki")
hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

FRENCH = "Le chat de la voisine dort au soleil, puis il mange sa soupe. "
SAMPLES = {  # a sentence each language reads natively, for the random text to mix with
    "a": "The quick brown fox jumps over 3 lazy dogs.",
    "b": "The colour of the harbour was grey.",
    "e": "El perro corre por el parque 25 veces.",
    "f": FRENCH,
    "h": "मैं आज बाजार जा रहा हूँ।",
    "i": "Il gatto dorme sul divano.",
    "j": "今日はとても良い天気ですね。",
    "p": "O gato dorme no sofá.",
    "z": "今天天气很好。",
}


@pytest.fixture(scope="module")
def speaker():
    """Planning needs no model: a stand-in with the two numbers plan reads."""
    return Speaker(SimpleNamespace(sample_rate=24000, max_tokens=MAX_TOKENS))


def voice(lang: str) -> Voice:
    return Voice(f"test-{lang}", np.zeros((VOICE_PACK_ROWS, 1, STYLE_DIM), np.float32), lang)


def plan(speaker, text: str, lang: str, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LanguageMismatchWarning, UnknownPhonemeWarning: expected here
        return speaker.plan(text, voice(lang), **options)


def phonemes(plan) -> str:
    return " ".join(c.phonemes for c in plan.chunks)


# -- random Unicode, every language ------------------------------------------------------------
_ANY = st.characters(codec=None, categories=None, exclude_categories=("Cs",))  # every plane
_SURROGATE = st.integers(0xD800, 0xDFFF).map(chr)
_CONTROL = st.sampled_from([chr(c) for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)]])
_COMBINING = st.characters(min_codepoint=0x300, max_codepoint=0x36F)
_PIECE = st.one_of(
    st.text(_ANY, max_size=300),
    st.text(st.one_of(_ANY, _CONTROL, _COMBINING), max_size=40),
    st.text(st.characters(min_codepoint=ord("0"), max_codepoint=ord("9")), min_size=1, max_size=40),  # digit runs
    st.text(st.sampled_from("0123456789.,"), min_size=1, max_size=40),
    st.text(st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF), max_size=40),  # emoji
    st.sampled_from([" ", "\n\n", "\t", ". ", "、", "。", "…"]),
)
_SETTINGS = {
    "deadline": None,
    "derandomize": True,  # the same examples in every run
    "database": None,
    "suppress_health_check": list(hypothesis.HealthCheck),
}


@pytest.mark.parametrize("lang", [lang.code for lang in LANGUAGES])
def test_random_unicode_gets_a_plan_or_our_error_in_linear_time(speaker, lang):
    """Random pieces of any Unicode (every plane, control and combining characters, digit runs, emoji)
    mixed with a sentence of the language, planned as a speech's start or as a stream's later text: a plan or
    a KokoroError (not a G2P library's failure caught at the last line), within a per-character bound."""

    @hypothesis.settings(max_examples=25, **_SETTINGS)
    @hypothesis.given(st.lists(st.one_of(_PIECE, st.just(SAMPLES[lang])), max_size=12), st.booleans())
    def check(pieces, continuing):
        text = "".join(pieces)
        options = {"first_chunk_tokens": None} if continuing else {}  # Wyoming's text after the first sentence
        start = time.thread_time()
        try:
            result = plan(speaker, text, lang, **options)
        except KokoroError as err:
            assert err.__cause__ is None, err  # not the last line of defence: the checks should have caught it
        else:
            assert result.chunks
        assert time.thread_time() - start < 1.0 + 2.0 * len(text) / 1000

    plan(speaker, SAMPLES[lang], lang)  # load the language's G2P outside the timed examples
    check()


@hypothesis.settings(max_examples=30, **_SETTINGS)
@hypothesis.given(st.text(_ANY, max_size=50), _SURROGATE, st.text(_ANY, max_size=50))
def test_a_lone_surrogate_anywhere_is_refused_at_its_position(before, surrogate, after):
    speaker = Speaker(SimpleNamespace(sample_rate=24000, max_tokens=MAX_TOKENS))
    with pytest.raises(InvalidInputError, match=rf"position {len(before)}: U\+{ord(surrogate):04X}, a lone surrogate"):
        plan(speaker, before + surrogate + after, "a")


@pytest.mark.parametrize("lang", [lang.code for lang in LANGUAGES])
def test_long_hostile_text_takes_linear_time(speaker, lang):
    """2,000 characters of random Unicode with digits and words between: the old espeak alignment took
    ~45 s per 1,000 characters on such text, Japanese's Cutlet minutes on a run of emoji."""
    import random

    rng = random.Random(lang)
    pool = [*SAMPLES[lang].split(), "1234", "😀😀😀", " ", " "]
    text = "".join(rng.choice(pool) if rng.random() < 0.3 else chr(rng.randrange(0x20, 0x30000)) for _ in range(1200))
    text = "".join(c for c in text if not 0xD800 <= ord(c) <= 0xDFFF)
    plan(speaker, SAMPLES[lang], lang)
    start = time.thread_time()
    try:
        plan(speaker, text, lang)
    except KokoroError:
        pass
    assert time.thread_time() - start < 2.0 * len(text) / 1000 + 0.5


# -- each case found by probing, by name ------------------------------------------------------------
def test_a_lone_surrogate_is_refused_with_its_position(speaker):
    with pytest.raises(InvalidInputError, match=r"position 6: U\+D800, a lone surrogate"):
        plan(speaker, "Hello \ud800 world.", "a")


def test_control_characters_are_removed_and_whitespace_kept(speaker):
    assert phonemes(plan(speaker, "Hello\x00 wor\x1bld.\tSee\x7f you.", "a")) == phonemes(
        plan(speaker, "Hello world.\tSee you.", "a")
    )


@pytest.mark.parametrize(
    "text, digits",
    [
        ("I owe you " + "9" * 5000 + " dollars.", 5000),
        ("1" + "1" * 400 + ".5", 402),
        ("Three hundred nines: " + "9" * 300, 300),
        ("1,000" + ",000" * 10, 34),
    ],
)
def test_an_absurd_number_is_refused_naming_the_limit(speaker, text, digits):
    with pytest.raises(InvalidInputError, match=rf"number of {digits} digits .* up to {MAX_NUMBER_DIGITS} digits"):
        plan(speaker, text, "a")


def test_numbers_up_to_the_limit_are_read_in_every_language(speaker):
    """Japanese's kana numbers stop at 9 digits and Chinese numerals at 16: longer ones are read digit by
    digit there (misaki raised an AssertionError; cn2an left digits no phoneme reads)."""
    number = "9" * MAX_NUMBER_DIGITS
    japanese = plan(speaker, f"りんごが{number}個あります。", "j")
    digits = [w for c in japanese.chunks for w in c.words if w.text == "9"]  # each digit a word, as written
    assert len(digits) == MAX_NUMBER_DIGITS and {w.phonemes for w in digits} == {phonemes(plan(speaker, "九", "j"))}
    chinese = plan(speaker, f"我有{number}个苹果。", "z")
    assert "".join(w.text for c in chinese.chunks for w in c.words) == f"我有{number}个苹果。"
    assert phonemes(chinese).count(phonemes(plan(speaker, "九", "z"))) == MAX_NUMBER_DIGITS
    for lang, sample in SAMPLES.items():
        assert plan(speaker, f"{sample} {number}.", lang).chunks


def test_digits_of_every_script_read_as_ascii_digits(speaker):
    """misaki's Japanese number reader raised KeyError for Arabic-Indic and Devanagari digits."""
    ascii_digits = phonemes(plan(speaker, "りんごが123個あります。", "j"))
    assert phonemes(plan(speaker, "りんごが١٢٣個あります。", "j")) == ascii_digits
    assert phonemes(plan(speaker, "りんごが१२३個あります。", "j")) == ascii_digits


@pytest.mark.parametrize("lang, count", [("a", 10000), ("j", 4000)])
def test_many_emoji_are_refused_quickly(speaker, lang, count):
    """10,000 emoji took 12.8 s in English (spaCy peels them off one word one at a time) and Japanese was
    cubic in a run of them (Cutlet's word grouping): both now cut long runs first."""
    plan(speaker, SAMPLES[lang], lang)
    start = time.thread_time()
    with pytest.raises(InvalidInputError, match="nothing to pronounce"):
        plan(speaker, "😀" * count, lang)
    assert time.thread_time() - start < 3.0


@pytest.mark.parametrize(
    "spec, message",
    [
        ("af_heart:1e308,am_adam:1e308", r"add up to more than the largest number \(weight 1e\+308 of af_heart\)"),
        ("af_heart(1e308)+am_adam(1e308)", r"add up to more than the largest number"),
        ("af_heart:nan,am_adam:1", "weight of af_heart must be a positive number, got nan"),
        ("af_heart:1,am_adam:inf", "weight of am_adam must be a positive number, got inf"),
        ("af_heart:-0.5,am_adam:1", "weight of af_heart must be a positive number, got -0.5"),
        ("af_heart:0", "weight of af_heart must be a positive number, got 0"),
    ],
)
def test_blend_weights_must_be_finite_and_sum_to_a_finite_positive_number(spec, message):
    with pytest.raises(InvalidVoiceError, match=message):
        parse_voice_spec(spec)


def test_extreme_but_finite_blend_weights_still_normalize():
    assert parse_voice_spec("af_heart:1e300,am_adam:1e300") == [("af_heart", 0.5), ("am_adam", 0.5)]


def test_a_g2p_library_failure_names_the_language_and_sentence(speaker, monkeypatch):
    """The last line of defence: an exception raised inside a G2P library becomes one line (the library's
    exception kept as its cause), while a bug in our own code keeps its traceback."""
    g2p = espeak.espeak_g2p("fr-fr")
    real = type(g2p.backend).phonemize

    def failing(self, text, *args, **kwargs):  # stands in for a library that chokes on one sentence
        if any("zut" in t for t in text):
            raise RuntimeError("internal state corrupted")
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(type(g2p.backend), "phonemize", failing)
    with pytest.raises(InvalidInputError) as err:
        plan(speaker, "Bonjour à tous. Alors zut, encore ! Au revoir.", "f")
    assert str(err.value).startswith("the French G2P could not read paragraph 1, the sentence 'Alors zut, encore !'")
    assert isinstance(err.value.__cause__, RuntimeError) and err.value.http_status == 400
    monkeypatch.undo()

    monkeypatch.setattr(espeak, "PUNCTUATION", None)  # our own code breaks: not the text's fault
    with pytest.raises(TypeError):
        plan(speaker, "Bonjour à tous.", "f")


# -- the espeak alignment -----------------------------------------------------------------------------
def _pieces(voice_name: str, text: str) -> tuple[list[str], list[str]]:
    """The written words and the spoken pieces ``paragraph_words`` aligns."""
    phonemes = espeak._phonemize(voice_name, text)
    spoken = [p for p in phonemes.split(" ") if any(not punct for _, punct in espeak._split_punctuation(p))]
    return espeak._written_words(text), spoken


def test_the_alignment_of_a_hand_written_example():
    written, spoken = _pieces("fr-fr", "J'ai 1234 euros et 2 chats.")
    assert written == ["J'ai", "1234", "euros", "et", "2", "chats"]
    assert spoken == ["ʒe", "mil", "døsɑ̃", "tʁɑ̃tkˈatʁ", "øʁˈoz", "e", "dˈø", "ʃˈa."]
    assert espeak._align("fr-fr", written, spoken) == [[0], [1, 2, 3], [4], [5], [6], [7]]
    written, spoken = _pieces("es", "Tengo 21 años y 1999 libros.")
    assert espeak._align("es", written, spoken) == [[0], [1], [2], [3], [4, 5, 6], [7]]


def test_doubling_the_text_doubles_the_alignment_work(monkeypatch):
    """The full table was quadratic once a number made the counts differ (French, 4,000 characters: 40 s).
    Counted in comparisons (deterministic), and timed loosely."""
    calls = []
    distance = espeak._distance.__wrapped__
    monkeypatch.setattr(espeak, "_distance", lambda a, b: calls.append(1) or distance(a, b))

    def work(copies: int) -> tuple[int, float]:
        written, spoken = _pieces("fr-fr", FRENCH * copies + "Il a 1234 euros.")
        assert len(written) != len(spoken)
        calls.clear()
        start = time.thread_time()
        espeak._align("fr-fr", written, spoken)
        return len(calls), time.thread_time() - start

    work(1)  # own readings cached
    (single, single_time), (double, double_time) = work(20), work(40)
    assert 1.5 < double / single < 2.5
    assert double_time < 4 * single_time + 0.1  # loosely: CPU time is noisy, the count above is exact


# -- cancellation ---------------------------------------------------------------------------------------
class CountingEvent(threading.Event):
    """Set after its ``n``-th check: where planning looks at it, and that it stops there."""

    def __init__(self, n: int):
        super().__init__()
        self.n, self.checks = n, 0

    def is_set(self) -> bool:
        self.checks += 1
        if self.checks >= self.n:
            self.set()
        return super().is_set()


def test_a_set_cancel_event_stops_planning_before_any_g2p(speaker):
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(RequestCancelled) as err:
        plan(speaker, "Bonjour à tous.", "f", cancel=cancel)
    assert (err.value.http_status, err.value.exit_code) == (499, 130)


@pytest.mark.parametrize("lang", ["f", "j"])
def test_cancel_is_checked_inside_one_long_paragraph(speaker, lang):
    """One paragraph, no blank line: the check runs inside it (espeak's alignment, Japanese sentences)."""
    text = (SAMPLES[lang] * 40) + ("Il a 1234 euros." if lang == "f" else "")
    assert plan(speaker, text, lang, cancel=CountingEvent(10**9)).chunks  # never set: no effect
    cancel = CountingEvent(5)
    with pytest.raises(RequestCancelled):
        plan(speaker, text, lang, cancel=cancel)
    assert cancel.checks == 5  # stopped at the first check after it was set
