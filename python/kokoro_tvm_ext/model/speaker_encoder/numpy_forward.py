"""The encoder's network in numpy (float32): the path used while no compiled library is at hand.

Partials [n, 160, 40] -> a 3-layer LSTM (gates i, f, g, o as torch orders them) -> the last layer's final hidden
state -> Linear 256->256 -> ReLU -> L2-normalised [n, 256].
"""

from __future__ import annotations

import numpy as np

from kokoro_tvm_ext.model.speaker_encoder.spec import HIDDEN, LAYERS


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def forward(weights: dict[str, np.ndarray], mels: np.ndarray) -> np.ndarray:
    x = np.asarray(mels, dtype=np.float32)
    n, steps, _ = x.shape
    for layer in range(LAYERS):
        w_ih, w_hh = weights[f"lstm.weight_ih_l{layer}"], weights[f"lstm.weight_hh_l{layer}"]
        bias = weights[f"lstm.bias_ih_l{layer}"] + weights[f"lstm.bias_hh_l{layer}"]
        projected = x @ w_ih.T + bias  # every step's input projection at once
        h = np.zeros((n, HIDDEN), np.float32)
        c = np.zeros((n, HIDDEN), np.float32)
        out = np.empty((n, steps, HIDDEN), np.float32)
        for t in range(steps):
            gates = projected[:, t] + h @ w_hh.T
            i, f, g, o = np.split(gates, 4, axis=1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
            out[:, t] = h
        x = out
    embeds = np.maximum(h @ weights["linear.weight"].T + weights["linear.bias"], 0.0)
    return embeds / np.linalg.norm(embeds, axis=1, keepdims=True)
