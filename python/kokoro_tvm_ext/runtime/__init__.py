"""Running a compiled artifact: numpy + TVM only, no torch."""

from .kokoro_tvm import KokoroTVM
from .noise import make_noise
from .threads import set_num_threads

__all__ = ["KokoroTVM", "make_noise", "set_num_threads"]
