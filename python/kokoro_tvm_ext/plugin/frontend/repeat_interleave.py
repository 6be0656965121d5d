"""``aten.repeat_interleave.Tensor(repeats)``: index i repeated ``repeats[i]`` times.

Kokoro's duration-driven alignment uses it; stock TVM has no converter. The
output length is data-dependent, so we compute it in the graph: the running sum
of ``repeats`` gives the total, ``tensor_to_shape`` turns it into a symbolic
shape, and ``match_cast`` binds a fresh size variable. Output position j then
takes index ``#{i : cumsum[i] <= j}``, a comparison against every boundary.
That costs len(output) * len(repeats) comparisons, which is small next to the
model around it (Kokoro: at most a few thousand frames times 510 tokens).
"""

from __future__ import annotations

from tvm import relax, tirx

from kokoro_tvm_ext.plugin.frontend.common import output_dtype, tensor_dtype
from kokoro_tvm_ext.plugin.frontend.registry import converter


@converter("repeat_interleave.Tensor")
def repeat_interleave(node, importer):
    bb = importer.block_builder
    repeats = importer.env[node.args[0]]
    if len(repeats.ty.shape) != 1:
        raise ValueError(f"repeat_interleave: repeats must be 1-D, got shape {repeats.ty.shape}")
    if tensor_dtype(repeats) != "int64":
        repeats = bb.emit(relax.op.astype(repeats, "int64"))
    ends = bb.emit(relax.op.cumsum(repeats, axis=0))

    output_size = node.kwargs.get("output_size")
    if output_size is None:
        total = bb.emit(relax.op.reshape(relax.op.sum(repeats, axis=[0]), [1]))
        size = tirx.Var(node.name + "_len", "int64")
        shape = bb.match_cast(relax.op.tensor_to_shape(total), relax.ShapeType([size]))
        del shape  # only binding `size` matters
    else:
        size = output_size if isinstance(output_size, int) else importer.env[output_size]

    positions = bb.emit(relax.op.arange(0, size, 1, "int64"))
    passed = relax.op.greater_equal(relax.op.expand_dims(positions, axis=1), relax.op.expand_dims(ends, axis=0))
    # torch returns the dtype of `repeats` (int64 or int32).
    return bb.emit(relax.op.sum(relax.op.astype(passed, output_dtype(node)), axis=[1]))
