"""numpy's OpenBLAS on one thread once a Speaker or the speaker encoder runs in the process.

After each call it splits across threads, OpenBLAS keeps its worker threads spinning for tens of milliseconds,
each on a core our kernels are about to use. Measured on 2 cores (AMD Zen 4, 2 threads): one mel-filter product
(1000 x 201 x 40) before the speaker encoder made its network call 2.0x slower, and a server speaking English,
whose tagger multiplies a few 288-wide matrices per sentence, gave its first audio 4-8% later. Every numpy product
of ours is that small, so one thread costs it nothing. Only the OpenBLAS inside numpy's own wheel is changed (not
torch's, which the references and benchmarks time beside ours), and ``OPENBLAS_NUM_THREADS`` set by the user
wins.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy


@functools.cache
def numpy_blas_on_one_thread() -> bool:
    """Limit numpy's bundled OpenBLAS to one thread for the rest of the process (once; later calls do nothing).
    False when the user chose its threads or numpy brings no OpenBLAS of its own (a distribution's numpy)."""
    if "OPENBLAS_NUM_THREADS" in os.environ:
        return False
    from threadpoolctl import ThreadpoolController  # ~12 ms: only once a Speaker or the encoder is made

    package = Path(numpy.__file__).resolve().parent
    homes = (str(package), str(package.parent / "numpy.libs"))  # where numpy's wheels keep their OpenBLAS
    controller = ThreadpoolController()
    numpy_own = [
        c.filepath for c in controller.lib_controllers if c.internal_api == "openblas" and c.filepath.startswith(homes)
    ]
    if not numpy_own:
        return False
    controller.select(filepath=numpy_own).limit(limits=1)
    return True
