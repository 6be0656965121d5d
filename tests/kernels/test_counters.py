"""The roofline counters from Python (tvm-ext/src/counters/): what bench/roofline.py reads."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tvm

pytestmark = pytest.mark.unit


@pytest.fixture
def counters():
    fn = tvm.get_global_func("kokoro_tvm_ext.counters")
    fn("reset")
    yield fn
    fn("off")
    fn("reset")


def snake(x: np.ndarray) -> np.ndarray:
    alpha = np.full((1, x.shape[1], 1), 0.7, np.float32)
    out = tvm.runtime.tensor(np.zeros_like(x))
    tvm.get_global_func("kokoro_tvm_ext.snake")(tvm.runtime.tensor(x), tvm.runtime.tensor(alpha), out)
    return out.numpy()


def test_a_counted_call_reads_back_with_its_bytes_and_the_same_output(counters, rng):
    x = rng.standard_normal((2, 3, 50)).astype(np.float32)
    off = snake(x)
    counters("on")
    on = snake(x)
    counters("off")
    snake(x)  # not counted
    read = json.loads(str(counters("read")))
    (row,) = [k for k in read["kernels"] if k["kernel"] == "kokoro_tvm_ext.snake"]
    # 300 float32 values read once and written once; the output bit for bit as uncounted.
    assert (row["class"], row["calls"], row["bytes"]) == ("Snake", 1, 2 * 4 * 300)
    assert row["ns"] > 0
    assert off.tobytes() == on.tobytes()
    assert [p["phase"] for p in read["phases"]][0] == "int8 quantize+pack activations"


def test_an_unknown_command_names_the_known_ones(counters):
    with pytest.raises(ValueError, match=r'counters: unknown command "start"; use "on", "off", "reset" or "read"'):
        counters("start")


def test_the_peaks_read_as_json():
    peaks = json.loads(str(tvm.get_global_func("kokoro_tvm_ext.measure_peaks")(1, 5)))
    assert peaks["threads"] == 1 and peaks["read_gbs"] > 0
