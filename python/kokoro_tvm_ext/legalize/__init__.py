"""Legalizations (Relax op → TIR) that replace stock TVM's where it fails.

Each module registers one op's ``FLegalize`` through TVM's public
``tvm.ir.register_op_attr`` at a higher priority level than TVM's own, on
import. ``LegalizeOps`` (in every TVM pipeline, ours included) then uses it;
nothing in TVM is patched. The frontend imports this package, because its
imported programs rely on these.
"""

from __future__ import annotations

from . import slice_scatter  # noqa: F401  (registers on import)

__all__ = ["slice_scatter"]
