"""A process whose TVM is runtime-only (a KokoroTVM or Speaker loaded first keeps TVM's compiler out) compiles
another artifact in a child process: ``ensure_artifact`` for weights, a precision or a target not cached yet,
as a script that speaks fp32 and then opens int8 does (it raised "TVM was imported without its compiler").
The child's artifact speaks as the same weights compiled in this process (the session's ``small_artifact``):
the same durations and samples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("kokoro")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

import kokoro_tvm_ext  # noqa: E402

pytestmark = pytest.mark.model

SCRIPT = """
import json, sys
from kokoro_tvm_ext.model.runtime.tvm_runtime import compiler_available, import_tvm
import_tvm()  # TVM's runtime alone, as a KokoroTVM loaded first leaves it
assert not compiler_available()
from kokoro_tvm_ext.model.artifact_cache import ensure_artifact
out = ensure_artifact(sys.argv[1], prebuilt=False, quiet=True)
print(json.dumps({"artifact": str(out), "compiler": "libtvm_compiler" in open("/proc/self/maps").read()}))
"""


def test_a_runtime_only_process_compiles_in_a_child(tmp_path, kokoro_model, small_artifact):
    weights = tmp_path / "seed0.safetensors"
    state = {k: np.ascontiguousarray(t.detach().numpy()) for k, t in kokoro_model.state_dict().items()}
    safetensors_numpy.save_file(state, str(weights))
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", SCRIPT, str(weights)],
        capture_output=True,
        text=True,
        env={**os.environ, "KOKORO_TVM_CACHE": str(tmp_path / "cache")},
        timeout=1800,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert not out["compiler"]  # the compiler never loaded in that process: its child compiled
    assert "exporting the text stage" not in result.stderr  # quiet=True reaches the child
    artifact = Path(out["artifact"])
    assert artifact.parent == tmp_path / "cache" / "artifacts"
    tokens, style = np.arange(1, 9, dtype=np.int64), np.full((1, 256), 0.1, np.float32)
    ours, ours_durations = kokoro_tvm_ext.KokoroTVM(artifact).synthesize(tokens, style, speed=9.0, noise_seed=0)
    here, here_durations = kokoro_tvm_ext.KokoroTVM(small_artifact).synthesize(tokens, style, speed=9.0, noise_seed=0)
    np.testing.assert_array_equal(ours_durations, here_durations)
    np.testing.assert_array_equal(ours, here)
