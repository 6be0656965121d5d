"""The English G2P's quick path against the reference path, computed here, on 2,400 sentences.

Quick (what ``say`` runs): spaCy's tokenizer rules run without spaCy, misaki's lexicon from the user
cache, espeak-ng without phonemizer. Reference (the path before it): misaki's G2P on ``spacy.blank('en')``
with the same tagger, misaki's own ``Lexicon``, misaki's ``EspeakFallback`` on phonemizer.
tests/data/english_corpus.txt: Poe's tales and sentences written for it (see make_english_corpus.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("misaki")
pytest.importorskip("spacy")

from kokoro_tvm_ext.speech.g2p import english, english_espeak, english_lexicon, english_tokenizer  # noqa: E402
from kokoro_tvm_ext.speech.markup import Override  # noqa: E402

CORPUS = Path(__file__).parent.parent / "data" / "english_corpus.txt"


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    lines = CORPUS.read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 2000
    return lines


def test_tokens_and_tags_are_spacys(sentences):
    reference = english._TaggedBlankEnglish()
    quick = english._TaggedTokens()
    extra = [
        "",
        " ",
        "  a  b  ",
        "a\tb\n\nc ",
        "one\x1ctwo\u00a0three\u2028four\u3000five",
        ":) (: :-( ;-) <3",
        "x" * 300,
    ]
    for text in sentences + extra:
        expected = [(t.text, t.whitespace_, t.like_num, t.tag_) for t in reference(text)]
        assert [(t.text, t.whitespace_, t.like_num, t.tag_) for t in quick(text)] == expected, text


@pytest.mark.parametrize("lang", ["a", "b"])
def test_words_are_the_reference_paths(sentences, lang):
    british = lang == "b"
    quick, reference = english.english_g2p(british), english.reference_g2p(british)
    mismatches = []
    for text in sentences:
        expected = english.g2p_words(reference, text)
        got = english.g2p_words(quick, text)
        if got != expected:
            mismatches.append((text, expected, got))
    assert not mismatches, f"{len(mismatches)} sentences differ, the first: {mismatches[:3]}"


def test_overrides_read_as_the_reference_reads_them():
    paragraph = ["Say ", Override("Kokoro", "kˈOkəɹO"), " twice, then ", Override("New York", "nu jˈɔɹk"), "."]
    for british in (False, True):
        expected = english.g2p_words(english.reference_g2p(british), paragraph)
        assert english.g2p_words(english.english_g2p(british), paragraph) == expected
        assert [w.phonemes for w in expected if w.text == "Kokoro"] == ["kˈOkəɹO"]


def test_alignment_is_spacys():
    from spacy.training import Alignment

    cases = [
        (["l'homme", "New York"], ["l'", "homme", "New", "York"]),
        (["a  b"], ["a", " ", "b"]),
        (["İstanbul", "x"], ["İstanbul", "x"]),
        (["don't", "stop."], ["do", "n't", "stop", "."]),
        (["x"], ["x", "\n"]),
    ]
    for written, tokens in cases:
        expected = Alignment.from_strings(written, tokens).y2x.data.tolist()
        assert english._alignment(written, tokens).y2x.data.tolist() == expected, (written, tokens)


@pytest.mark.parametrize("british", [False, True])
def test_cached_lexicon_is_misakis(british):
    from misaki import en

    cached = english_lexicon.cached_lexicon(en, british)
    assert english_lexicon.cache_path(british).is_file()
    with warnings.catch_warnings():  # misaki reads its dictionaries with a deprecated importlib call
        warnings.simplefilter("ignore", DeprecationWarning)
        built = en.Lexicon(british)
    assert {k: v for k, v in vars(cached).items() if k not in ("golds", "silvers")} == {
        k: v for k, v in vars(built).items() if k not in ("golds", "silvers")
    }
    assert dict(cached.golds) == built.golds
    assert dict(cached.silvers) == built.silvers
    assert cached.golds.get(None) is None and None not in cached.silvers


def test_a_damaged_cache_is_built_again(tmp_path, monkeypatch):
    from misaki import en

    monkeypatch.setenv("KOKORO_TVM_CACHE", str(tmp_path))
    for path in (english_tokenizer.rules_path(), english_lexicon.cache_path(False)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x00not what was written")
    assert english_tokenizer.load_rules.__wrapped__() == english_tokenizer.load_rules()
    built = english_lexicon.cached_lexicon(en, False)  # misaki's own, and the file written again
    assert isinstance(built.golds, dict)
    assert dict(english_lexicon.cached_lexicon(en, False).golds) == built.golds


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=12),  # letters and digits alone
            st.sampled_from(["-", ".", "/", ":", "'", "…", "^", "+", "=", "@", "x.com", "www.", "²", "—"]),
        ),
        max_size=8,
    ).map("".join)
)
def test_words_of_letters_and_digits_are_cut_as_spacy_cuts_them(word):
    """The tokenizer skips its infix and URL patterns for letters and digits alone (compiled only when a word
    with a mark comes): spaCy's blank English cuts every such word, and its neighbours with marks, the same."""
    reference = english._TaggedBlankEnglish()
    quick = english._TaggedTokens()
    for text in (word, f"({word}).", f"a {word}-b"):
        assert [t.text for t in quick(text)] == [t.text for t in reference(text)], text


def test_cached_tokenizer_rules_are_this_spacys():
    assert english_tokenizer.load_rules() == english_tokenizer.extract_rules()


def test_espeak_words_are_phonemizers():
    from misaki import espeak  # noqa: F401 - points phonemizer at espeakng_loader's espeak-ng
    from phonemizer.backend import EspeakBackend

    words = ["Kokoro", "Zorblax", "flibbertigibbet", "Llanfair", "Brno", "Nguyen", "x86", "wug's", "", "ab cd", "Æsir"]
    for language in ("en-us", "en-gb"):
        options = dict(preserve_punctuation=True, with_stress=True, tie="^")
        ours = english_espeak.EspeakWords(language, **options)
        theirs = EspeakBackend(language, **options)
        for word in words:
            assert ours.phonemize([word]) == theirs.phonemize([word]), (language, word)


def test_a_word_our_espeak_binding_fails_on_is_read_through_phonemizer(monkeypatch):
    def failing(self, text):
        raise RuntimeError("espeak-ng stand-in failure")

    monkeypatch.setattr(english_espeak.EspeakWords, "phonemize", failing)
    text = "Zorblax met Kokoro in Brno."
    assert english.g2p_words(english.english_g2p(False), text) == english.g2p_words(english.reference_g2p(False), text)


def test_a_cold_sentence_imports_neither_spacy_nor_phonemizer():
    """Nor num2words until a number comes, which is then read as misaki reads it."""
    english.english_g2p(False)  # the caches exist (built by the tests above when run alone)
    number = "It costs 42 dollars, the 3rd time in 1999."
    code = (
        "import json, sys\n"
        "from kokoro_tvm_ext.speech.g2p import english\n"
        "words = english.paragraph_words('Hello from TVM, running Kokoro on a plain CPU.', 'a')\n"
        "assert [w.phonemes for w in words if w.text == 'Kokoro'] == ['kəkˈɔɹO'], words\n"
        "cold = sorted(m for m in ('spacy', 'phonemizer', 'thinc', 'torch', 'num2words') if m in sys.modules)\n"
        f"read = [[w.text, w.phonemes] for w in english.g2p_words(english.english_g2p(False), {number!r})]\n"
        "print(json.dumps([cold, read]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    cold, read = json.loads(out.stdout)
    assert cold == [], out.stderr
    assert read == [[w.text, w.phonemes] for w in english.g2p_words(english.reference_g2p(False), number)]
