"""Running a compiled artifact: numpy + TVM only, no torch."""

from kokoro_tvm_ext.model.runtime.kokoro_tvm import KokoroTVM
from kokoro_tvm_ext.model.runtime.noise import make_noise
from kokoro_tvm_ext.model.runtime.threads import set_num_threads

__all__ = ["KokoroTVM", "make_noise", "set_num_threads"]
