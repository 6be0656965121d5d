"""Resemblyzer 0.1.4's GE2E speaker encoder, as numbers: its audio, mel, partial-window, silence-trim and
network hyperparameters (read from its hparams.py and voice_encoder.py), and its weights' names and shapes."""

from __future__ import annotations

SAMPLE_RATE = 16_000
WINDOW = 400  # 25 ms: the FFT and Hann window length
HOP = 160  # 10 ms
N_MELS = 40
PARTIAL_FRAMES = 160  # 1.6 s of mel frames per partial utterance
PARTIALS_PER_SECOND = 1.3  # embed_utterance's default rate
MIN_COVERAGE = 0.75  # a last partial is kept if at least this much of it is real audio
TARGET_DBFS = -30.0  # volume normalisation, raising quiet audio only

# The silence trim: voice flags per 30 ms window, smoothed over 8 windows, voiced runs dilated by 6 + 1 windows.
VAD_WINDOW = 30 * SAMPLE_RATE // 1000
VAD_SMOOTHING = 8
VAD_MAX_SILENCE = 6

HIDDEN = 256
EMBEDDING = 256
LAYERS = 3

#: The tensors the encoder runs on, by their name in the checkpoint's ``model_state``.
WEIGHT_SHAPES = {
    **{
        f"lstm.{kind}_l{layer}": shape
        for layer in range(LAYERS)
        for kind, shape in (
            ("weight_ih", (4 * HIDDEN, N_MELS if layer == 0 else HIDDEN)),
            ("weight_hh", (4 * HIDDEN, HIDDEN)),
            ("bias_ih", (4 * HIDDEN,)),
            ("bias_hh", (4 * HIDDEN,)),
        )
    },
    "linear.weight": (EMBEDDING, HIDDEN),
    "linear.bias": (EMBEDDING,),
}


def lstm_weight_names() -> list[str]:
    """The LSTM's tensors in torch's flat order (per layer: w_ih, w_hh, b_ih, b_hh), the plugin kernel's."""
    return [
        f"lstm.{kind}_l{layer}" for layer in range(LAYERS) for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    ]
