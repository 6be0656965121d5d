"""The compiled encoder network, run through TVM's runtime: mel partials [n, 160, 40] -> embeddings [n, 256]."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from kokoro_tvm_ext import _native  # noqa: F401  (registers the kernels the library calls)
from kokoro_tvm_ext.model.runtime.cpu_features import check_cpu
from kokoro_tvm_ext.model.runtime.tvm_runtime import import_tvm, load_vm
from kokoro_tvm_ext.model.speaker_encoder.compile import LIBRARY, read_meta
from kokoro_tvm_ext.support.blas_threads import numpy_blas_on_one_thread
from kokoro_tvm_ext.support.errors import ArtifactError


class CompiledNetwork:
    """The artifact in ``out_dir``, loaded. Callable; thread-safe (calls take turns: the VM keeps per-call state)."""

    def __init__(self, out_dir: Path) -> None:
        tvm = import_tvm()
        self.meta = read_meta(out_dir)
        check_cpu(self.meta, out_dir)  # before any of its code runs
        if self.meta.get("tvm") != tvm.__version__:
            raise ArtifactError(f"{out_dir} was compiled with TVM {self.meta.get('tvm')}; delete it to compile again")
        self._tvm = tvm
        self._vm = load_vm(out_dir / LIBRARY, tvm)
        self._lock = threading.Lock()
        numpy_blas_on_one_thread()  # the mel front end's product would otherwise slow the next call 2x

    def __call__(self, mels: np.ndarray) -> np.ndarray:
        with self._lock:
            return self._vm["main"](self._tvm.runtime.tensor(mels)).numpy()
