"""TVM's C++ log lines: the two known-harmless warnings are hidden, everything else is kept."""

import io
import os

from kokoro_tvm_ext.plugin.native_log import quiet_harmless_warnings


def test_harmless_lines_hidden_others_replayed_in_order():
    out = io.StringIO()
    with quiet_harmless_warnings(out):
        os.write(2, b"[1] Warning: Detected pow(x, y) where y >= 3, it is recommended\n")
        os.write(2, b"real problem: something else\n")
        os.write(2, b"[2] Warning: Fast mode segfaults when there are out-of-bounds indices.\n")
        os.write(2, b"second line\n")
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["real problem: something else", "second line"]
    assert "2 known-harmless TVM warnings hidden" in lines[2]


def test_fd2_restored_even_when_the_block_raises(capfd):
    out = io.StringIO()
    try:
        with quiet_harmless_warnings(out):
            os.write(2, b"before the error\n")
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    os.write(2, b"after\n")
    assert out.getvalue() == "before the error\n"
    assert capfd.readouterr().err == "after\n"
