"""What the tests of the reduced-precision modes (bf16, int8) share: their kernels' error paths,
the fallback run in a child process, the compiled artifact of a mode, and how its audio is judged."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")


class OneLayer(torch.nn.Module):
    """One layer, applied to x [1, C, L] (Linear: to x transposed)."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        if isinstance(self.layer, torch.nn.Linear):
            return self.layer(x.transpose(1, 2))
        return self.layer(x)


def assert_packer_and_kernel_errors_reach_python(
    precision: str, packed_dtype: str, packed_shape: tuple[int, ...], k3_shape: str
) -> None:
    """pack_<precision> and conv1d_<precision> on tiny inputs: a right call, then each kind of wrong one.

    `packed_shape` is what the packer makes of 4 x 3 x 2 conv1d weights; `k3_shape` the packed shape a
    kernel size of 3 would need, as the kernel's error prints it.
    """
    import tvm

    pack = tvm.get_global_func(f"kokoro_tvm_ext.pack_{precision}")
    w = tvm.runtime.tensor(np.ones((4, 3, 2), np.float32))
    with pytest.raises(ValueError, match=f'pack_{precision}: kind: expected "conv1d"'):
        pack("conv2d", 1, w)
    packed = pack("conv1d", 1, w)
    assert packed.dtype == packed_dtype and tuple(packed.shape) == packed_shape
    conv = tvm.get_global_func(f"kokoro_tvm_ext.conv1d_{precision}")
    x = tvm.runtime.tensor(np.ones((1, 3, 8), np.float32))
    out = tvm.runtime.tensor(np.zeros((1, 4, 7), np.float32))
    conv(1, 0, 0, 1, 1, 0, 2, x, packed, out)
    np.testing.assert_allclose(out.numpy(), 6.0, rtol=1e-6)
    with pytest.raises(ValueError, match=rf"conv1d_{precision}: w: expected shape {k3_shape}"):
        conv(1, 0, 0, 1, 1, 0, 3, x, packed, tvm.runtime.tensor(np.zeros((1, 4, 6), np.float32)))
    with pytest.raises(TypeError, match=f"conv1d_{precision}: w: expected dtype {packed_dtype}, got float32"):
        conv(1, 0, 0, 1, 1, 0, 2, x, w, out)


def fallback_max_error(script: str, switch: str) -> float:
    """Runs `script` in a child process with the environment variable `switch` hiding the CPU feature
    (the switch is read once per process); returns the number it prints after "max error"."""
    env = {**os.environ, switch: "1"}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return float(result.stdout.split("max error")[-1])


def precision_runtime(kokoro_model, precision: str):
    """The random-weights Kokoro compiled with `precision`, cached across runs like conftest's small_artifact."""
    import kokoro_tvm_ext
    from kokoro_tvm_ext.model.artifact_cache import artifact_key, ensure_compiled
    from kokoro_tvm_ext.support.cache import cache_dir

    out = cache_dir() / "test-artifacts" / artifact_key("random-weights-seed0", precision=precision)
    return kokoro_tvm_ext.KokoroTVM(ensure_compiled(out, lambda: kokoro_model, precision=precision, quiet=True))


def cross_compiled(kokoro_model, precision: str = "fp32"):
    """``kokoro_model`` cross-compiled for cortex-a76 (a Raspberry Pi 5's CPU) in ``precision``: a library-only
    artifact (no weights: its transforms run on aarch64 only), the same for any weights of this config. Kept in
    the user cache under ``test-artifacts/`` like ``small_artifact``, keyed by the compiler sources, the
    precision and the target."""
    from system_tools import CROSS_COMPILER, require

    from kokoro_tvm_ext.model import artifact_cache
    from kokoro_tvm_ext.support.cache import cache_dir

    require(*CROSS_COMPILER)
    target = artifact_cache.target_spec("cortex-a76")
    key = artifact_cache.library_key(precision=precision, target=target)
    out = cache_dir() / "test-artifacts" / f"library-{key}"
    return artifact_cache.ensure_compiled(out, lambda: kokoro_model, precision=precision, target=target, quiet=True)


def snr_db(got: np.ndarray, want: np.ndarray) -> float:
    """The signal-to-noise ratio of `got` against `want`, in dB."""
    return float(10 * np.log10(np.sum(want.astype(np.float64) ** 2) / np.sum((got - want).astype(np.float64) ** 2)))
