"""ATen → Relax conversion: our converters, handed to TVM's own importer."""
from __future__ import annotations

from . import clamp, repeat_interleave  # noqa: F401  (each module registers its converters)
from .registry import CONVERTERS, converter


def from_exported_program(exported_program, *, custom_convert_map=None, **kwargs):
    """TVM's ``from_exported_program`` with our converters added.

    Entries in ``custom_convert_map`` override ours, so users can always swap
    in their own conversion for any op. Other keyword arguments go to TVM.
    """
    from tvm.relax.frontend.torch import from_exported_program as tvm_from_exported_program

    convert_map = dict(CONVERTERS)
    convert_map.update(custom_convert_map or {})
    return tvm_from_exported_program(exported_program, custom_convert_map=convert_map, **kwargs)


__all__ = ["CONVERTERS", "converter", "from_exported_program"]
