"""Use this artifact or compile one: the compiled model for a set of weights, from the user cache."""

from __future__ import annotations

from pathlib import Path

from kokoro_tvm_ext.model.artifact_cache import artifact_key, cached_artifact_dir, ensure_compiled


def ensure_artifact(
    resolved_weights,
    *,
    lstm_impl: str = "plugin",
    precision: str = "fp32",
    quiet: bool = False,
    prebuilt: bool = True,
) -> Path:
    """The artifact for these weights: cached, else these weights bound to a cached artifact of the same
    compiled library (seconds, no torch), else (if ``prebuilt``) bound to the best installed prebuilt
    library, else compiled (once, atomically; needs the `compile` extra). ``resolved_weights`` come from
    ``weights.locate``: they are only built and read when the cache lacks them."""
    from kokoro_tvm_ext.speech.assets.weights import load_model, materialize

    out = cached_artifact_dir(artifact_key(resolved_weights.fingerprint(), lstm_impl, precision))
    return ensure_compiled(
        out,
        lambda: load_model(materialize(resolved_weights)),
        checkpoint=lambda: _fitting_checkpoint(materialize(resolved_weights).path),
        lstm_impl=lstm_impl,
        precision=precision,
        weights_fingerprint=resolved_weights.fingerprint(),
        quiet=quiet,
        prebuilt=prebuilt,
    )


def _fitting_checkpoint(path: Path) -> dict:
    """The checkpoint's tensors, refused unless they are exactly Kokoro-82M's (a tensor missing, extra or of
    another shape named): the library checks only the tensors it takes, so a checkpoint of a larger model
    would otherwise run with its extra parts silently left out."""
    from kokoro_tvm_ext.speech.assets.checkpoint import check_fits, read_checkpoint

    state = read_checkpoint(path)
    check_fits({name: array.shape for name, array in state.items()}, f"weights {path}")
    return state
