"""release_free_memory gives freed heap pages back to the system (glibc's malloc_trim).

Reference: the process's VmRSS from /proc, in a fresh subprocess. Freed blocks
held between live ones cannot be returned by free() itself (only the heap's top
is), so RSS stays up until the trim.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent("""
    import ctypes, json
    from kokoro_tvm_ext.model.runtime.heap import release_free_memory

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]

    def rss_mb():
        with open("/proc/self/status") as status:
            return next(int(l.split()[1]) / 1024 for l in status if l.startswith("VmRSS:"))

    size = 100 * 1024  # below glibc's mmap threshold: these live in the heap
    blocks = [libc.malloc(size) for _ in range(1000)]
    for b in blocks:
        libc.memset(b, 1, size)  # touch every page
    for i, b in enumerate(blocks):
        if i % 10:  # keep every tenth block: the holes between them stay in the heap
            libc.free(b)
    before = rss_mb()
    release_free_memory()
    print(json.dumps({"before": before, "after": rss_mb()}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim, /proc")
def test_freed_heap_pages_go_back_to_the_system():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    rss = json.loads(out.stdout.splitlines()[-1])
    # ~88 MB were freed in holes; most of it must be returned.
    assert rss["before"] - rss["after"] > 60, rss
