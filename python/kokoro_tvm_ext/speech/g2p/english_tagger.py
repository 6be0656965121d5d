"""spaCy's ``en_core_web_sm`` tagger (tok2vec + tagger, 3.8.0, MIT) run in numpy: the tags KPipeline's misaki
reads, without loading spaCy or its model on ``say``'s path.

The network, as spaCy's config describes it: each token's NORM, PREFIX (first character), SUFFIX (last three),
SHAPE, SPACY (a space follows) and IS_SPACE are 64-bit ids (a string's id is MurmurHash64A of its UTF-8, seed
1, or its fixed id when it is one of spaCy's symbols); each id picks 4 rows of its own table by MurmurHash3
x64-128 (one seed per table) and sums them; the six sums -> maxout (3 pieces) -> layer norm; then 4 residual
blocks of (the token and its two neighbours -> maxout -> layer norm), over the doc with 4 zero rows either
side (thinc pads the doc so; the blocks change those rows too); a linear layer gives the 50 tag scores.
Its weights (``data/english_tagger.npz``) are the model's own, extracted by scripts/derive_english_tagger.py
with the norm tables the tags depend on; tests/speech/test_english_parity.py holds the result to the model's.
"""

from __future__ import annotations

import json
import threading
from functools import lru_cache
from importlib import resources

import numpy as np

WEIGHTS = "english_tagger.npz"
_PAD = 4  # rows of zeros thinc puts around a doc before the residual blocks
_M64 = 0xFFFFFFFFFFFFFFFF
_M32 = 0xFFFFFFFF


@lru_cache(maxsize=65536)
def hash_string(text: str) -> int:
    """spaCy's id of a string: MurmurHash64A of its UTF-8 with seed 1."""
    data = text.encode("utf-8")
    m, r = 0xC6A4A7935BD1E995, 47
    h = (1 ^ (len(data) * m)) & _M64
    whole = len(data) // 8 * 8
    for i in range(0, whole, 8):
        k = (int.from_bytes(data[i : i + 8], "little") * m) & _M64
        k = ((k ^ (k >> r)) * m) & _M64
        h = ((h ^ k) * m) & _M64
    if whole < len(data):
        h = ((h ^ int.from_bytes(data[whole:], "little")) * m) & _M64
    h = ((h ^ (h >> r)) * m) & _M64
    return h ^ (h >> r)


_C1, _C2 = np.uint64(0x87C37B91114253D5), np.uint64(0x4CF5AD432745937F)
_F1, _F2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)
_U33, _U31, _U32 = np.uint64(33), np.uint64(31), np.uint64(32)


def _fmix64(k: np.ndarray) -> np.ndarray:
    k ^= k >> _U33
    k *= _F1
    k ^= k >> _U33
    k *= _F2
    k ^= k >> _U33
    return k


def embedding_rows(ids: np.ndarray, seed: int) -> np.ndarray:
    """thinc's hash of each 64-bit id (MurmurHash3 x64-128 of its 8 bytes): (n, 4) uint32."""
    with np.errstate(over="ignore"):
        k1 = ids.astype(np.uint64) * _C1
        k1 = ((k1 << _U31) | (k1 >> _U33)) * _C2
        h1 = np.uint64(seed) ^ k1 ^ np.uint64(8)
        h2 = np.full_like(h1, np.uint64(seed) ^ np.uint64(8))
        h1 += h2
        h2 += h1
        h1, h2 = _fmix64(h1), _fmix64(h2)
        h1 += h2
        h2 += h1
    out = np.empty((len(ids), 4), np.uint32)
    out[:, 0], out[:, 1] = h1 & np.uint64(_M32), h1 >> _U32
    out[:, 2], out[:, 3] = h2 & np.uint64(_M32), h2 >> _U32
    return out


def word_shape(text: str) -> str:
    """spaCy's shape: x, X, d for lower, upper, digit, other characters as written; a run cut at four."""
    if len(text) >= 100:
        return "LONG"
    out, last, run = [], "", 0
    for c in text:
        s = ("X" if c.isupper() else "x") if c.isalpha() else "d" if c.isdigit() else c
        run = run + 1 if s == last else 0
        last = s
        if run < 4:
            out.append(s)
    return "".join(out)


def _maxout_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, g: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """thinc's Maxout (``w``: in x (out * pieces), from thinc's out x pieces x in) then LayerNorm (epsilon
    1e-8 on the variance)."""
    out, pieces = b.shape
    y = (x @ w + b.reshape(-1)).reshape(len(x), out, pieces).max(-1)
    y = (y - y.mean(1, keepdims=True)) / np.sqrt(y.var(1, keepdims=True) + 1e-8)
    return y * g + beta


class CnnTagger:
    """Tags spaCy's tokens of one text: ``tag(texts, spaces) -> tags`` (whitespace tokens included, as spaCy
    runs the model over them too)."""

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        self.tables = [arrays[f"E{j}"].astype(np.float32) for j in range(6)]
        self.seeds = [int(arrays[f"seed{j}"]) for j in range(6)]
        self.layers = [
            (
                np.ascontiguousarray(arrays[f"W{j}"].reshape(-1, arrays[f"W{j}"].shape[-1]).T, np.float32),
                *(arrays[f"{name}{j}"].astype(np.float32) for name in ("b", "G", "g")),
            )
            for j in range(5)
        ]
        self.out_w, self.out_b = arrays["Wt"].astype(np.float32), arrays["bt"].astype(np.float32)
        self.tags = _strings(arrays["tags"])
        self.norm_table = dict(zip(arrays["norm_keys"].tolist(), _strings(arrays["norm_vals"])))
        self.symbols = dict(zip(_strings(arrays["symbol_names"]), arrays["symbol_ids"].tolist()))
        extra = json.loads(arrays["norms"].tobytes().decode())
        self.base_norms: dict[str, str] = extra["base"]
        self.special_norms: dict[str, list[list[str]]] = extra["special"]

    def _id(self, text: str) -> int:
        return self.symbols.get(text) or hash_string(text)

    def norms(self, texts: list[str], spaces: list[bool]) -> list[str]:
        """spaCy's NORM of each token: a tokenizer special case's (``n't`` -> not, when the words around it
        spell that case), else the model's lexeme_norm table's, else spaCy's base norms (``’`` -> '), else
        the lower case."""
        out = [self.norm_table.get(hash_string(t)) or self.base_norms.get(t) or t.lower() for t in texts]
        i = 0
        while i < len(texts):
            for k in (3, 2, 1):
                pieces = self.special_norms.get("".join(texts[i : i + k]))
                glued = not any(spaces[i : i + k - 1])
                if pieces and glued and len(pieces) == k and [p[0] for p in pieces] == texts[i : i + k]:
                    for j, (_, norm) in enumerate(pieces):
                        if norm:
                            out[i + j] = norm
                    i += k - 1
                    break
            i += 1
        return out

    def vectors(self, texts: list[str], spaces: list[bool]) -> np.ndarray:
        columns = [
            [self._id(n) for n in self.norms(texts, spaces)],
            [self._id(t[:1]) for t in texts],
            [self._id(t[-3:]) for t in texts],
            [self._id(word_shape(t)) for t in texts],
            [int(s) for s in spaces],
            [int(t.isspace()) for t in texts],
        ]
        parts = []
        for table, seed, ids in zip(self.tables, self.seeds, columns):
            rows = embedding_rows(np.array(ids, np.uint64), seed) % np.uint32(len(table))
            parts.append(table[rows].sum(1))
        x = _maxout_norm(np.concatenate(parts, 1), *self.layers[0])
        edge = np.zeros((_PAD, x.shape[1]), np.float32)
        x = np.concatenate([edge, x, edge])
        zero = edge[:1]
        for layer in self.layers[1:]:
            padded = np.concatenate([zero, x, zero])
            window = np.concatenate([padded[:-2], padded[1:-1], padded[2:]], 1)  # before, itself, after
            x = x + _maxout_norm(window, *layer)
        return x[_PAD:-_PAD]

    def tag(self, texts: list[str], spaces: list[bool]) -> list[str]:
        if not texts:
            return []
        scores = self.vectors(texts, spaces) @ self.out_w.T + self.out_b
        return [self.tags[i] for i in scores.argmax(1)]


def _strings(array: np.ndarray) -> list[str]:
    return array.tobytes().decode().split("\n")


def _text_array(strings) -> np.ndarray:
    return np.frombuffer("\n".join(strings).encode(), dtype=np.uint8)


def extract(nlp) -> dict[str, np.ndarray]:
    """The arrays of :class:`CnnTagger` from a loaded ``en_core_web_sm`` (tok2vec and tagger enabled)."""
    from spacy.attrs import NORM, ORTH
    from spacy.lang.norm_exceptions import BASE_NORMS
    from spacy.symbols import IDS

    tok2vec, tagger = nlp.get_pipe("tok2vec").model, nlp.get_pipe("tagger").model
    arrays: dict[str, np.ndarray] = {}
    for j, m in enumerate(m for m in tok2vec.walk() if m.name == "hashembed"):
        arrays[f"E{j}"], arrays[f"seed{j}"] = m.get_param("E"), np.array(m.attrs["seed"])
    maxouts = [m for m in tok2vec.walk() if m.name == "maxout"]
    norms = [m for m in tok2vec.walk() if m.name == "layernorm"]
    for j, (m, n) in enumerate(zip(maxouts, norms)):
        arrays[f"W{j}"], arrays[f"b{j}"] = m.get_param("W"), m.get_param("b")
        arrays[f"G{j}"], arrays[f"g{j}"] = n.get_param("G"), n.get_param("b")
    (softmax,) = (m for m in tagger.walk() if m.name == "softmax")
    arrays["Wt"], arrays["bt"] = softmax.get_param("W"), softmax.get_param("b")
    arrays["tags"] = _text_array(nlp.get_pipe("tagger").labels)
    table = dict(nlp.vocab.lookups.get_table("lexeme_norm").items())
    arrays["norm_keys"] = np.array(list(table), dtype=np.uint64)
    arrays["norm_vals"] = _text_array(table.values())
    arrays["symbol_names"] = _text_array(IDS)
    arrays["symbol_ids"] = np.array(list(IDS.values()), dtype=np.uint64)
    special = {
        string: [[p[ORTH], p.get(NORM, "")] for p in pieces]
        for string, pieces in nlp.tokenizer.rules.items()
        if any(NORM in p for p in pieces)
    }
    arrays["norms"] = np.frombuffer(json.dumps({"base": BASE_NORMS, "special": special}).encode(), dtype=np.uint8)
    return arrays


def load(file) -> CnnTagger:
    with np.load(file) as data:
        return CnnTagger({k: data[k] for k in data.files})


_lock = threading.Lock()
_tagger: CnnTagger | None = None


def shipped_tagger() -> CnnTagger:
    """The tagger with the weights shipped in the package (read once)."""
    global _tagger
    with _lock:
        if _tagger is None:
            with (resources.files(__package__) / "data" / WEIGHTS).open("rb") as file:
                _tagger = load(file)
        return _tagger
