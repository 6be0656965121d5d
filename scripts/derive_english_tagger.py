"""Derives the English tagger's weights (python/kokoro_tvm_ext/speech/g2p/data/english_tagger.npz) from
spaCy's en_core_web_sm (the [dev] extra's upload, MIT): its tags on public text are the training labels of
an averaged perceptron (:mod:`kokoro_tvm_ext.speech.g2p.english_tagger`).

Training text: the training half of tests/data/make_english_parity_corpus.py (never its test lines),
tests/data/english_corpus.txt less Poe's tales (which the parity corpus tests on), and every such sentence
that quotes with ``"`` once more with single quotes. Each sentence is read as the G2P reads it: normalised
(:mod:`.english_normalize`), then cut by spaCy's English tokenizer rules.

Run: python scripts/derive_english_tagger.py [--epochs N]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import re
from collections import defaultdict
from pathlib import Path

from kokoro_tvm_ext.speech.g2p import english_tagger
from kokoro_tvm_ext.speech.g2p.english import english_g2p, kpipeline_g2p
from kokoro_tvm_ext.speech.g2p.english_normalize import normalize
from kokoro_tvm_ext.speech.g2p.english_tokenizer import english_tokenizer

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "python" / "kokoro_tvm_ext" / "speech" / "g2p" / "data" / english_tagger.WEIGHTS


def training_sentences() -> list[str]:
    spec = importlib.util.spec_from_file_location("corpus", ROOT / "tests" / "data" / "make_english_parity_corpus.py")
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    test, train = corpus.corpora()
    poe = " ".join((ROOT / "bench" / "data" / "poe-tales.txt").read_text(encoding="utf-8").split())
    tested = {s for _, s in test}
    own = (ROOT / "tests" / "data" / "english_corpus.txt").read_text(encoding="utf-8").splitlines()
    train += [s for s in own if s.strip() and " ".join(s.split()) not in poe]
    train += [corpus.single_quoted(s) for s in train if re.search('["“”]', s)]
    return [s for s in train if s not in tested]


def labelled(sentences: list[str]) -> list[tuple[list[str], list[bool], list[str]]]:
    """Each sentence as (words, spaces, en_core_web_sm's tags), space tokens left out."""
    nlp = kpipeline_g2p(False).nlp
    is_word = english_g2p(False).lexicon.golds.__contains__
    tokenizer = english_tokenizer()
    out = []
    for sentence in sentences:
        text, _ = normalize(sentence, is_word)
        tokens = tokenizer(text)
        doc = nlp(text)
        if [t.text for t in doc] != [t.text for t in tokens]:
            continue
        kept = [(t.text, bool(t.whitespace_), t.tag_) for t in doc if not t.is_space]
        if kept:
            words, spaces, tags = map(list, zip(*kept))
            out.append((words, spaces, tags))
    return out


class _Scorer:
    """The tagger's prediction on weights being trained (dicts, updated in place)."""

    def __init__(self, weights: dict[str, dict[str, float]], tags: list[str]) -> None:
        self.weights = weights
        self.tags = tags

    def predict(self, feats: list[str]) -> str:
        scores: dict[str, float] = {}
        for f in feats:
            for tag, w in self.weights.get(f, {}).items():
                scores[tag] = scores.get(tag, 0.0) + w
        return max(self.tags, key=lambda t: (scores.get(t, 0.0), t)) if scores else "NN"


def train(data, epochs: int, seed: int = 0) -> dict[str, dict[str, float]]:
    """Averaged perceptron, greedy left to right on the predicted tags, as the tagger runs."""
    tags = sorted({t for _, _, ts in data for t in ts})
    weights: dict[str, dict[str, float]] = defaultdict(dict)
    totals: dict[tuple[str, str], float] = defaultdict(float)
    stamps: dict[tuple[str, str], int] = defaultdict(int)
    model = _Scorer(weights, tags)
    step = 0
    rng = random.Random(seed)
    for epoch in range(epochs):
        rng.shuffle(data)
        right = total = 0
        for words, spaces, gold in data:
            prev2, prev = "-START2-", "-START-"
            quotes = english_tagger.quotes_before(words)
            for i in range(len(words)):
                feats = english_tagger.features(words, spaces, quotes, i, prev, prev2)
                guess = model.predict(feats)
                step += 1
                if guess != gold[i]:
                    for f in feats:
                        for tag, delta in ((gold[i], 1.0), (guess, -1.0)):
                            key = (f, tag)
                            w = weights[f].get(tag, 0.0)
                            totals[key] += (step - stamps[key]) * w
                            stamps[key] = step
                            weights[f][tag] = w + delta
                right += guess == gold[i]
                total += 1
                prev2, prev = prev, guess
        print(f"epoch {epoch + 1}: {right / total:.4f} of {total} tokens", flush=True)
    averaged: dict[str, dict[str, float]] = {}
    for f, row in weights.items():
        for tag, w in row.items():
            key = (f, tag)
            avg = (totals[key] + (step - stamps[key]) * w) / step
            if abs(avg) >= 0.5:
                averaged.setdefault(f, {})[tag] = round(avg, 2)
    return averaged, tags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    args = parser.parse_args()
    data = labelled(training_sentences())
    print(f"{len(data)} sentences, {sum(len(w) for w, _, _ in data)} tokens")
    weights, tags = train(data, args.epochs)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    english_tagger.save(OUT, weights, tags)
    print(f"{len(weights)} features -> {OUT} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
