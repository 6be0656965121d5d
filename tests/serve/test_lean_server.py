"""The server process runs on TVM's runtime alone: neither torch nor TVM's compiler is mapped
into it after it has spoken (tests/runtime/test_lean_runtime.py checks `say` and the runtime)."""

from __future__ import annotations

import sys

import pytest
from conftest import speech


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/maps")
def test_the_server_maps_neither_torch_nor_the_compiler(server_process):
    proc, url = server_process
    response = speech(url, model="kokoro", input="Hello there.", voice="af_heart", response_format="wav")
    assert response.status_code == 200 and len(response.content) > 1000
    with open(f"/proc/{proc.pid}/maps") as f:
        libraries = {line.split()[-1].rsplit("/", 1)[-1] for line in f if "/" in line}
    assert "libtvm_runtime.so" in libraries
    assert not [lib for lib in libraries if "libtvm_compiler" in lib or "libtorch" in lib], sorted(libraries)
