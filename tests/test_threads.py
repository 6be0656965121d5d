"""One thread count for TVM's pool and the kernels' pool: TVM_NUM_THREADS, set_num_threads, num_threads=; numpy's
BLAS on one thread beside them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from kokoro_tvm_ext.model.runtime import set_num_threads

# Runs one kernel (which sizes the kernels' pool), then reports both pools' sizes:
# TVM's as it says, ours through the error a different count gets.
REPORT = """
import os
import numpy as np, tvm
x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(1, 2, 6)
alpha = np.array([0.5, 2.0], np.float32).reshape(1, 2, 1)
out = tvm.runtime.tensor(np.zeros_like(x))
tvm.get_global_func("kokoro_tvm_ext.snake")(tvm.runtime.tensor(x), tvm.runtime.tensor(alpha), out)
assert np.allclose(out.numpy(), x + np.sin(alpha * x) ** 2 / alpha, atol=1e-5)
print(os.environ["TVM_NUM_THREADS"], tvm.get_global_func("runtime.NumThreads")())
try:
    set_num_threads(int(os.environ["TVM_NUM_THREADS"]) + 1)
except ValueError as err:
    print(err)
"""


def run(before: str, **env_extra) -> tuple[str, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "RAYON_NUM_THREADS")}
    env.update(env_extra)
    code = "from kokoro_tvm_ext.model.runtime import set_num_threads\n" + textwrap.dedent(before) + REPORT
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    counts, message = result.stdout.strip().splitlines()
    env_count, tvm_count = counts.split()
    return env_count, tvm_count, message


def test_default_is_every_cpu_for_both_pools():
    # Stock TVM would take half the CPUs on x86 (it assumes hyperthreads).
    cpus = str(len(os.sched_getaffinity(0)))
    env_count, tvm_count, message = run("")
    assert (env_count, tvm_count) == (cpus, cpus)
    assert f"already runs {cpus} threads" in message and f"TVM_NUM_THREADS={int(cpus) + 1}" in message


def test_set_num_threads_after_import_sizes_both_pools():
    env_count, tvm_count, message = run("set_num_threads(1)\nset_num_threads(1)  # the same count again is fine\n")
    assert (env_count, tvm_count) == ("1", "1")
    assert "already runs 1 threads" in message


def test_tvm_num_threads_sizes_both_pools():
    env_count, tvm_count, message = run("", TVM_NUM_THREADS="1")
    assert (env_count, tvm_count) == ("1", "1")
    assert "already runs 1 threads" in message


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2", None])
def test_bad_counts_are_value_errors(bad):
    with pytest.raises(ValueError, match="num_threads must be a positive integer"):
        set_num_threads(bad)


# numpy's OpenBLAS threads as OpenBLAS itself reports them (threadpoolctl asks openblas_get_num_threads), before
# and after the code under test; torch, when a test process has it, keeps its own.
BLAS_REPORT = """
import json, sys
sys.path.insert(0, {tests!r})
import numpy, threadpoolctl
def numpy_blas():
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if "numpy" in i["filepath"]]
before = numpy_blas()
{code}
print(json.dumps([before, numpy_blas()]))
"""


def blas_threads(code: str, **env_extra) -> tuple[list[int], list[int]]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    env.update(env_extra)
    script = BLAS_REPORT.format(tests=os.path.dirname(__file__), code=textwrap.dedent(code))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    before, after = json.loads(result.stdout.strip().splitlines()[-1])
    return before, after


SPEAKER = """
from plan_only import NoModel
from kokoro_tvm_ext.speech.speaker import Speaker
Speaker(NoModel())
"""


def test_a_speaker_keeps_numpys_blas_to_one_thread():
    # Its workers spin after each call on the cores the model's kernels use (support/blas_threads.py).
    before, after = blas_threads(SPEAKER)
    assert len(before) == 1 and (before[0] > 1 or len(os.sched_getaffinity(0)) == 1)  # numpy's wheel's, every core
    assert after == [1]


def test_the_speaker_encoder_keeps_numpys_blas_to_one_thread():
    _, after = blas_threads(
        "from kokoro_tvm_ext.model.speaker_encoder import SpeakerEncoder\nSpeakerEncoder.load(threads=2)\n"
    )
    assert after == [1]


def test_openblas_num_threads_set_by_the_user_is_kept():
    before, after = blas_threads(SPEAKER, OPENBLAS_NUM_THREADS="2")
    assert before == after == [2]
