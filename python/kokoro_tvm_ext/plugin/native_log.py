"""Quiet TVM's known-harmless C++ warnings during a compile or a load, keep everything else.

TVM logs from C++ straight to file descriptor 2, so Python's ``warnings`` and
``logging`` cannot filter it. A Kokoro compile prints ~70 lines of two warnings
that do not apply to us:

- ``pow(x, y) where y >= 3``: GELU's ``x**3``; the CPU's libm pow is exact for a
  negative base with an integer exponent (the stage-1 fidelity tests cover it).
- ``Fast mode segfaults when there are out-of-bounds indices``: embedding
  lookups; ``KokoroTVM`` checks every token id before running.
- ``Scope Loaded:`` / ``Scope Saving:``: TVM 0.27's VM logs this for each small
  tensor constant of the library it loads or exports (Kokoro's sine and STFT
  tables, 16 lines each time since the weights became parameters); a trace, not
  a problem.

Everything else TVM writes is passed through unchanged, after the block ends.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile

HARMLESS = (
    "Detected pow(x, y) where y >= 3",
    "Fast mode segfaults when there are out-of-bounds indices",
    "Scope Loaded:",
    "Scope Saving:",
)


@contextlib.contextmanager
def quiet_harmless_warnings(stream=None, count_hidden: bool = True):
    """Capture fd 2 for the block; then replay its lines except the harmless ones (and, with
    ``count_hidden``, say how many were hidden)."""
    stream = stream or sys.stderr
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            hidden = 0
            for line in capture.read().decode(errors="replace").splitlines():
                if any(h in line for h in HARMLESS):
                    hidden += 1
                else:
                    print(line, file=stream)
            if hidden and count_hidden:
                print(f"    ({hidden} known-harmless TVM warnings hidden)", file=stream, flush=True)
