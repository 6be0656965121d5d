"""Metadata for a fake artifact: tests of loading that never map or run its files."""

from __future__ import annotations


def fake_meta_fields(**changes) -> dict:
    """Every field compile_kokoro gives write_meta, valid for a weights.bin of at least 16 bytes that starts with
    a 2x2 float32 token embedding; ``changes`` replace fields."""
    return {
        "kokoro_tvm_ext": "0.1.0",
        "tvm": "0.27.0",
        "target": {"kind": "llvm"},
        "cpu_features": [],
        "lstm_impl": "plugin",
        "precision": "fp32",
        "max_tokens": 510,
        "max_batch": 64,
        "n_token": 2,
        "sample_rate": 24000,
        "samples_per_frame": 600,
        "harmonics": 9,
        "weights_fingerprint": None,
        "weights_index": {"text_stage": [[0, [2, 2], "float32"]]},
        "token_embeddings": [["text_stage", 0]],
        "checkpoint_inputs": {"text_stage": [[["embedding.weight"], [2, 2], "float32"]]},
        "checkpoint_weights": {"text_stage": 1},
        "compile_seconds": 1.5,
        **changes,
    }
