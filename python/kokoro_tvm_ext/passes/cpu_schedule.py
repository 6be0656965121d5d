"""A default schedule for every PrimFunc TVM's CPU pipeline leaves unscheduled.

Stock ``relax/backend/cpu_generic`` legalizes and fuses but runs every kernel
on one thread. This rule inlines elementwise producers into their consumers
and runs each remaining block's leading spatial loops (fused) as one
``parallel`` loop; the inner loops stay plain so LLVM can vectorize them.
Reductions keep their reduction loops serial inside each parallel iteration.
"""
from __future__ import annotations

from tvm import s_tir, tirx
from tvm.s_tir.dlight.analysis import normalize_prim_func
from tvm.s_tir.dlight.base import ScheduleRule, try_inline_contiguous_spatial


class ParallelOuterLoops(ScheduleRule):
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
            try:
                outer = sch.fuse(*loops[:lead]) if lead > 1 else loops[0]
                sch.parallel(outer)
                changed = True
            except Exception:  # e.g. loops shared with another block: leave serial
                continue
        return sch if changed else None


def schedule_pass():
    """The module pass that applies the rule to all unscheduled PrimFuncs."""
    from tvm.s_tir.dlight import ApplyDefaultSchedule

    return ApplyDefaultSchedule(ParallelOuterLoops())
