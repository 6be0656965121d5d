"""bench/roofline.py's arithmetic on a hand-made run: rows, TVM-generated time, rates and fractions of peak."""

from __future__ import annotations

import pytest
from kokoro_bench.roofline import _rows, kernel_precision, table

pytestmark = pytest.mark.unit  # no Kokoro, no server


def test_kernel_names_give_their_arithmetic():
    assert [kernel_precision(k) for k in ("kokoro_tvm_ext.conv1d_int8", "kokoro_tvm_ext.matmul_bf16")] == [
        "int8",
        "bf16",
    ]
    assert kernel_precision("kokoro_tvm_ext.conv1d_winograd") == "f32"


def test_one_run_splits_into_kernels_generated_code_and_python():
    stage = {
        "kernels": [
            {
                "kernel": "kokoro_tvm_ext.conv1d_int8",
                "class": "im2col conv",
                "calls": 3,
                "ns": 2_000_000_000,
                "flops": 400_000_000_000,
                "bytes": 10_000_000,
            },
            {
                "kernel": "kokoro_tvm_ext.snake",
                "class": "Snake",
                "calls": 1,
                "ns": 500_000_000,
                "flops": 0,
                "bytes": 2_000_000_000,
            },
        ],
        "phases": [{"phase": "int8 quantize+pack activations", "ns": 400_000_000}],
        "cpu_s": 4.0,
        "minor_faults": 7,
    }
    work: dict = {}
    rows = _rows({"audio_stage": (3.0, stage)}, 4.0, 2, work)
    assert rows["im2col conv [int8]"] == 2.0 and rows["Snake [f32]"] == 0.5
    assert rows["TVM-generated code (audio stage)"] == 0.5  # 3 s less 2.5 s in kernels
    assert rows["Python and runtime between stages"] == 1.0  # 4 s less the 3 s stage
    assert rows["  of which: int8 quantize+pack activations (CPU time / threads)"] == 0.2
    assert work["im2col conv [int8]"]["flops"] == 400_000_000_000

    result = {"seconds": {r: [s] for r, s in rows.items()}, "work": work}
    peaks = {"f32_fma_gflops": 100.0, "bf16_dot_gflops": 200.0, "int8_dot_gops": 400.0, "read_gbs": 8.0}
    _, body = table(result, peaks)
    gemm = next(r for r in body if r[0] == "im2col conv [int8]")
    # 4e11 operations in 2 s: 200 GOP/s, half the int8 peak; 10 MB in 2 s.
    assert gemm[1:3] == ["2000.0", "50.0%"] and gemm[6:8] == ["200.0", "50%"]
    snake = next(r for r in body if r[0] == "Snake [f32]")
    # 2 GB in 0.5 s: 4 GB/s, half the read bandwidth; no compute peak for an element-wise row.
    assert snake[7:] == ["", "4.0", "50%"]
    assert body[-1][:3] == ["total", "4000.0", "100%"]
    # Where the kernels use AMX tiles, their rate is the int8 rows' peak: 200 GOP/s of 1000.
    _, body = table(result, {**peaks, "amx_int8_gops": 1000.0, "amx_bf16_gflops": None})
    assert next(r for r in body if r[0] == "im2col conv [int8]")[7] == "20%"
