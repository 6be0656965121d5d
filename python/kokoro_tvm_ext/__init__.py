"""kokoro-tvm-ext: run Kokoro-82M on stock Apache TVM.

Four layers, each importing only those below it (``tests/test_layers.py`` checks it)::

    apps     cli/  serve/  book/          parse arguments, encode outputs
    speech   speech/                      Speaker: text + Voice -> chunks -> synthesis -> Speech
    model    model/                       Kokoro-82M: weights, adapters, compile, artifact cache, runtime
    plugin   plugin/                      converters, passes, legalizations, kernel interfaces, _native
    support  support/                     errors, versions, the user cache: used by every layer

Only the apps (and users) import this root package; ``kokoro_tvm_ext.errors`` is the public name of
``support.errors``.

Importing this package checks the pinned TVM versions, loads TVM's FFI runtime
(`tvm_ffi`), then loads our Rust library, which registers its kernels under the
``kokoro_tvm_ext.`` prefix in TVM's one global function registry. It loads
neither torch nor TVM's compiler: the converters (``CONVERTERS``,
``from_exported_program``) and ``compile_kokoro`` import them on first use.
"""

import os as _os

from kokoro_tvm_ext.support.versions import check_versions as _check_versions

_check_versions()

# TVM reads both variables when its thread pool starts; values the user set are kept.
# Our kernels run on their own threads between TVM's parallel loops. TVM's idle
# pool workers otherwise spin (300000 sched_yield rounds) and take a core from
# them: 5-9% of Kokoro's run time on 2 cores.
_os.environ.setdefault("TVM_THREAD_POOL_SPIN_COUNT", "0")
# One thread count for TVM's pool and our kernels' pool (which our library sizes
# from this variable on its first kernel call). Unset, TVM would take half the CPUs on x86,
# assuming two hyperthreads per core: 1 thread on a 2-core VM, 5-12% slower.
_os.environ.setdefault(
    "TVM_NUM_THREADS",
    str(len(_os.sched_getaffinity(0)) if hasattr(_os, "sched_getaffinity") else _os.cpu_count() or 1),
)

# The imports below read the environment set above, so they cannot come first.
from kokoro_tvm_ext.support.torch_free import torch_hidden as _torch_hidden  # noqa: E402

try:
    # Must come first: it loads libtvm_ffi.so, the registry our library links to.
    # tvm_ffi imports torch whenever it is installed (~1.3 s, ~500 MB), and cuda-python's
    # driver bindings (40-130 ms; torch's CUDA wheels bring them); synthesis never passes
    # it torch objects or CUDA streams, so it is imported as if both were absent.
    with _torch_hidden("cuda.bindings"):
        import tvm_ffi as _tvm_ffi  # noqa: F401
except ImportError as err:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "kokoro_tvm_ext needs the TVM FFI runtime, but `import tvm_ffi` failed "
        f"({err}). Install it with: pip install apache-tvm-ffi==0.1.15.post2"
    ) from err

from kokoro_tvm_ext import _native  # noqa: E402

__version__: str = _native.__version__


def __getattr__(name: str):
    # Torch-dependent names load on first use, so the runtime needs no torch.
    # Compiler-side names (they import TVM's compiler) load on first use too.
    if name in ("CONVERTERS", "from_exported_program"):
        from kokoro_tvm_ext.plugin import frontend

        return getattr(frontend, name)
    if name == "use_plugin_lstm":
        from kokoro_tvm_ext.plugin.torch_lstm import use_plugin_lstm

        return use_plugin_lstm
    if name == "compile_kokoro":
        from kokoro_tvm_ext.model.compile import compile_kokoro

        return compile_kokoro
    if name in ("enable_kernels", "disable_kernels", "kernels_enabled", "kernels_active"):
        from kokoro_tvm_ext.plugin.legalize import switch as kernel_legalize

        return getattr(kernel_legalize, name)
    if name in ("Speaker", "SpeakerConfig", "Speech", "Voice"):
        from kokoro_tvm_ext import speech

        return getattr(speech, name)
    if name == "KokoroTVM":
        from kokoro_tvm_ext.model.runtime import KokoroTVM

        return KokoroTVM
    raise AttributeError(f"module 'kokoro_tvm_ext' has no attribute {name!r}")


def registered_functions() -> list[str]:
    """The global function names this plugin registered in TVM's registry."""
    return list(_native.registered_functions())


__all__ = [
    "CONVERTERS",
    "KokoroTVM",
    "Speaker",
    "SpeakerConfig",
    "Speech",
    "Voice",
    "compile_kokoro",
    "disable_kernels",
    "enable_kernels",
    "kernels_active",
    "kernels_enabled",
    "__version__",
    "from_exported_program",
    "registered_functions",
    "use_plugin_lstm",
]
