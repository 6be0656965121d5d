"""A default schedule for every PrimFunc TVM's CPU pipeline leaves unscheduled.

Stock ``relax/backend/cpu_generic`` legalizes and fuses but runs every kernel
on one thread. This rule inlines elementwise producers into their consumers
and runs each remaining block's leading spatial loops (fused) as one
``parallel`` loop; the inner loops stay plain so LLVM can vectorize them
(an all-spatial block keeps its innermost loop for that).
Reductions keep their reduction loops serial inside each parallel iteration.
"""

from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.s_tir.dlight import ApplyDefaultSchedule
from tvm.s_tir.dlight.analysis import normalize_prim_func
from tvm.s_tir.dlight.base import ScheduleRule, try_inline_contiguous_spatial

# Fewer parallel iterations than this and an all-spatial block fuses all its loops.
MIN_PARALLEL = 16


def _known_below(sch, loops, bound: int) -> bool:
    """Whether the loops' extents are constants whose product is below ``bound``."""
    product = 1
    for loop in loops:
        extent = sch.get(loop).extent
        if not isinstance(extent, tirx.IntImm):
            return False
        product *= int(extent)
    return product < bound


class ParallelOuterLoops(ScheduleRule):
    """The dlight rule; :class:`ScheduleParallelLoops` is the pass that applies it."""

    def __init__(self, min_parallel: int = MIN_PARALLEL):
        self.min_parallel = min_parallel

    def apply(self, func, target, tunable):  # noqa: ARG002 - ScheduleRule's signature
        if not isinstance(func, tirx.PrimFunc):
            return None
        sch = s_tir.Schedule(func)
        try:
            infos = normalize_prim_func(sch)
        except Exception:  # functions dlight cannot normalise stay as they are
            return None
        if not infos:
            return None
        infos = try_inline_contiguous_spatial(sch, infos)
        changed = False
        for info in infos:
            kinds = info.dom_kind()
            lead = len(kinds) - len(kinds.lstrip("S"))
            loops = sch.get_loops(info.block_rv)
            if lead == 0 or len(loops) < lead:
                continue
            # An all-spatial block keeps its innermost loop out of the fuse, so
            # LLVM sees a contiguous inner loop to vectorize (3x on ALBERT's
            # masked softmax), unless that leaves too little to share out.
            n_par = lead
            if lead == len(loops) and lead > 1 and not _known_below(sch, loops[: lead - 1], self.min_parallel):
                n_par = lead - 1
            try:
                outer = sch.fuse(*loops[:n_par]) if n_par > 1 else loops[0]
                sch.parallel(outer)
                changed = True
            except Exception:  # e.g. loops shared with another block: leave serial
                continue
        return sch if changed else None


@tvm.transform.module_pass(opt_level=0, name="ScheduleParallelLoops")
class ScheduleParallelLoops:
    """Applies :class:`ParallelOuterLoops` to every PrimFunc not yet scheduled (needs a current target)."""

    def __init__(self, min_parallel: int = MIN_PARALLEL):
        self.apply = ApplyDefaultSchedule(ParallelOuterLoops(min_parallel))

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return self.apply(mod.clone())  # ApplyDefaultSchedule updates the module it is given
