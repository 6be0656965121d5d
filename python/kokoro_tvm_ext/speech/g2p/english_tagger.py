"""A small Penn Treebank tagger distilled from spaCy's ``en_core_web_sm``: the tags KPipeline's misaki reads,
without loading spaCy's model on ``say``'s path.

An averaged perceptron, greedy left to right, over spaCy's English tokens (:mod:`.english_tokenizer`): each
token's features are its word, affixes and shape, the words around it, the spaces around it (an opening
quote is glued to the word after it) and the two tags before it. Its weights (``data/english_tagger.npz``)
are derived by scripts/derive_english_tagger.py from en_core_web_sm's own tags (MIT, spaCy 3.8.0) over public
text that tests/speech/test_english_parity.py does not test on; docs/pronunciation.md says how close it comes.
"""

from __future__ import annotations

import hashlib
import threading
from importlib import resources

import numpy as np

WEIGHTS = "english_tagger.npz"
_START = ("-START2-", "-START-")


def _shape(text: str) -> str:
    """x for lower-case letters, X upper, d digits, the rest as written; runs of one kind cut to two."""
    out = []
    for c in text[:12]:
        s = "x" if c.islower() else "X" if c.isupper() else "d" if c.isdigit() else c
        if len(out) < 2 or not (out[-1] == s and out[-2] == s):
            out.append(s)
    return "".join(out)


def quotes_before(words: list[str]) -> list[str]:
    """For each token, whether an odd number of double and of single quotation marks came before it in the
    sentence: a quote mark inside an open quotation more likely closes it."""
    out, double, single = [], 0, 0
    for w in words:
        out.append(f"{double % 2}{single % 2}")
        double += w in ('"', "“", "”")
        single += w in ("'", "‘", "’")
    return out


def features(words: list[str], spaces: list[bool], quotes: list[str], i: int, prev: str, prev2: str) -> list[str]:
    """What the tagger sees of token ``i``: ``words`` are the token texts, ``spaces`` whether each is
    followed by whitespace, ``quotes`` :func:`quotes_before`, ``prev``/``prev2`` the tags chosen for the two
    tokens before it."""
    w = words[i]
    lower = w.lower()
    before = words[i - 1].lower() if i > 0 else "-START-"
    before2 = words[i - 2].lower() if i > 1 else "-START2-"
    after = words[i + 1].lower() if i + 1 < len(words) else "-END-"
    after2 = words[i + 2].lower() if i + 2 < len(words) else "-END2-"
    glued_left = i > 0 and not spaces[i - 1]
    glued_right = i + 1 < len(words) and not spaces[i]
    glue = f"{glued_left:d}{glued_right:d}"
    return [
        "b",
        "w " + lower,
        "s3 " + lower[-3:],
        "s2 " + lower[-2:],
        "p1 " + lower[:1],
        "sh " + _shape(w),
        "t1 " + prev,
        "t2 " + prev2,
        "t12 " + prev + " " + prev2,
        "t1w " + prev + " " + lower,
        "w-1 " + before,
        "w-1w " + before + " " + lower,
        "w-2 " + before2,
        "w+1 " + after,
        "ww+1 " + lower + " " + after,
        "w+2 " + after2,
        "s3+1 " + after[-3:],
        "s3-1 " + before[-3:],
        "t1w+1 " + prev + " " + after,
        "gl " + glue,
        "first" if i == 0 else "in",
    ] + (
        []
        if w[:1].isalnum()  # the spaces and quotations around a mark (a quote opens or closes)
        else ["glw " + glue + " " + lower, "q " + quotes[i] + " " + lower, "qg " + glue + quotes[i] + " " + lower]
    )


def feature_keys(feats: list[str]) -> np.ndarray:
    """Each feature's 64-bit key (BLAKE2b of its UTF-8): the weights are found by key, so loading them builds no
    dict of their 179,000 feature names (~60 ms of a cold ``say``)."""
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(f.encode(), digest_size=8).digest(), "little") for f in feats),
        np.uint64,
        len(feats),
    )


class PerceptronTagger:
    """Tags a list of words: ``tag(words, spaces) -> tags``. ``keys``: the features' keys (:func:`feature_keys`),
    sorted; row ``i`` of ``weights`` (features x tags) is the feature of ``keys[i]``."""

    def __init__(self, keys: np.ndarray, weights: np.ndarray, tags: list[str]) -> None:
        self.keys = keys
        self.weights = weights
        self.tags = tags

    def predict(self, feats: list[str]) -> str:
        wanted = feature_keys(feats)
        at = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
        rows = at[self.keys[at] == wanted]
        if not rows.size:
            return "NN"
        return self.tags[int(np.argmax(self.weights[rows].sum(axis=0, dtype=np.float32)))]

    def tag(self, words: list[str], spaces: list[bool]) -> list[str]:
        prev2, prev = _START
        out = []
        quotes = quotes_before(words)
        for i in range(len(words)):
            tag = self.predict(features(words, spaces, quotes, i, prev, prev2))
            out.append(tag)
            prev2, prev = prev, tag
        return out


def save(path, weights: dict[str, dict[str, float]], tags: list[str]) -> None:
    """Weights as an npz: the features' keys, sorted, and a sparse matrix in their order (row starts, tag columns,
    float16). Not compressed: read in 2 ms instead of 16 (the wheel's zip compresses it anyway)."""
    names = list(weights)
    keys = feature_keys(names)
    if len(np.unique(keys)) != len(keys):
        raise ValueError("two features share a 64-bit key")  # ~1e-9 for 179,000 features
    order = np.argsort(keys)
    column = {t: j for j, t in enumerate(tags)}
    starts, cols, vals = [0], [], []
    for i in order:
        for tag, w in sorted(weights[names[i]].items()):
            cols.append(column[tag])
            vals.append(w)
        starts.append(len(cols))
    np.savez(
        path,
        keys=keys[order],
        tags=np.frombuffer("\n".join(tags).encode(), dtype=np.uint8),
        starts=np.array(starts, dtype=np.int32),
        cols=np.array(cols, dtype=np.uint8),
        vals=np.array(vals, dtype=np.float16),
    )


def load(file) -> PerceptronTagger:
    with np.load(file) as data:
        keys = data["keys"]
        tags = data["tags"].tobytes().decode().split("\n")
        starts, cols, vals = data["starts"], data["cols"], data["vals"]
    weights = np.zeros((len(keys), len(tags)), dtype=np.float16)
    weights[np.repeat(np.arange(len(keys)), np.diff(starts)), cols] = vals
    return PerceptronTagger(keys, weights, tags)


_lock = threading.Lock()
_tagger: PerceptronTagger | None = None


def shipped_tagger() -> PerceptronTagger:
    """The tagger with the weights shipped in the package (read once)."""
    global _tagger
    with _lock:
        if _tagger is None:
            with (resources.files(__package__) / "data" / WEIGHTS).open("rb") as file:
                _tagger = load(file)
        return _tagger
