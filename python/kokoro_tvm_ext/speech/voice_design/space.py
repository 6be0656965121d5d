"""The space the search moves in: voice packs as a few numbers, built from the stock packs.

A candidate ``x`` has ``K + P`` values: blend logits over the ``K`` anchors (the stock voices nearest the
recordings) and coordinates along the stock packs' first ``P`` principal directions, each in units of the stock
voices' spread along it. Its pack is ``softmax(logits) @ anchors + sum_k x_k s_k U_k``: ``x = 0`` is the anchors'
plain mean. The 54 packs span a low-dimensional space (bench/voice_design.py measures how much of a held-out pack
the others' first principal directions rebuild), so a dozen values reach what 130,560 free ones would, with far
fewer syntheses, and every candidate stays a pack of Kokoro's shape and scale.

``outside`` measures how far a candidate leaves the stock voices' region: the length of its move along the
principal directions (in units of the stock spread) beyond ``sqrt(P)``, the length a typical stock pack's own
coordinates have. (A Mahalanobis distance over every direction does not work here: with 54 packs in 130,560
dimensions every stock pack sits at the same distance, sqrt(53), from their mean, and a held-out one far beyond.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kokoro_tvm_ext.model.spec import STYLE_DIM, VOICE_PACK_ROWS

ANCHORS = 4
DIRECTIONS = 8


@dataclass(frozen=True)
class StyleSpace:
    anchors: np.ndarray = field(repr=False)  # [K, D] float64: the anchor packs, flattened
    mean: np.ndarray = field(repr=False)  # [D]: the stock packs' mean
    directions: np.ndarray = field(repr=False)  # [R, D]: every principal direction of the stock packs (rows unit)
    spread: np.ndarray = field(repr=False)  # [R]: the stock packs' standard deviation along each
    steps: int  # P: how many directions a candidate moves along

    @classmethod
    def build(cls, stock: list[np.ndarray], anchors: list[np.ndarray], steps: int = DIRECTIONS) -> StyleSpace:
        """The space of ``anchors`` (packs) moved along the first ``steps`` principal directions of ``stock``."""
        x = np.stack([np.asarray(p, np.float64).reshape(-1) for p in stock])
        mean = x.mean(axis=0)
        centred = x - mean
        # The principal directions from the small Gram matrix (n x n, not D x D).
        values, vectors = np.linalg.eigh(centred @ centred.T)
        order = np.argsort(values)[::-1]
        values, vectors = values[order], vectors[:, order]
        keep = values > values[0] * 1e-10
        values, vectors = values[keep], vectors[:, keep]
        directions = (vectors.T @ centred) / np.sqrt(values)[:, None]
        spread = np.sqrt(values / max(len(stock) - 1, 1))
        anchors = np.stack([np.asarray(p, np.float64).reshape(-1) for p in anchors])
        return cls(anchors, mean, directions, spread, min(steps, len(spread)))

    @property
    def size(self) -> int:
        return len(self.anchors) + self.steps

    def pack(self, x) -> np.ndarray:
        """The voice pack [510, 1, 256] float32 of candidate ``x``."""
        x = np.asarray(x, np.float64)
        k = len(self.anchors)
        logits = x[:k] - x[:k].max()
        weights = np.exp(logits) / np.exp(logits).sum()
        flat = weights @ self.anchors + (x[k:] * self.spread[: self.steps]) @ self.directions[: self.steps]
        return flat.reshape(VOICE_PACK_ROWS, 1, STYLE_DIM).astype(np.float32)

    def outside(self, x) -> float:
        """How far candidate ``x`` moves along the principal directions beyond a stock pack's typical reach
        (``sqrt(P)`` spreads; 0 within it)."""
        move = np.asarray(x, np.float64)[len(self.anchors) :]
        return max(0.0, float(np.linalg.norm(move)) - float(np.sqrt(max(self.steps, 1))))


def style_cosine(a, b) -> float:
    """Cosine similarity of two packs, each flattened: how close two voices' styles are."""
    a = np.asarray(a, np.float64).reshape(-1)
    b = np.asarray(b, np.float64).reshape(-1)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
