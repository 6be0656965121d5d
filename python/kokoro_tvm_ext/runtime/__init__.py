"""Running a compiled artifact: numpy + TVM only, no torch."""
from .kokoro_tvm import KokoroTVM
from .noise import make_noise

__all__ = ["KokoroTVM", "make_noise"]
