"""``aten.convolution`` that keeps its input dtype.

Stock TVM 0.27 emits every convolution (and every matrix product, see
``matmul.py``) with ``out_dtype="float32"``. A float64 graph then computes
it in float32 and silently loses precision (a float64 DFT written as a
conv1d comes back accurate to 1e-8, not 1e-16); float16 graphs get float32
results. We emit it with torch's own result dtype. float32 nodes go to TVM's
own converter unchanged.

Kokoro needs this for its harmonic source, which we compute in float64
(see ``kokoro_tvm_ext.model.adapters.decoder``): its forward STFT is a conv1d.
"""

from __future__ import annotations

from tvm import relax

from kokoro_tvm_ext.plugin.frontend.common import output_dtype
from kokoro_tvm_ext.plugin.frontend.registry import converter

_LAYOUTS = {3: ("NCW", "OIW", "IOW"), 4: ("NCHW", "OIHW", "IOHW"), 5: ("NCDHW", "OIDHW", "IODHW")}


def _arg(node, importer, index, key, default):
    if len(node.args) > index:
        value = node.args[index]
    else:
        value = node.kwargs.get(key, default)
    return importer.env[value] if hasattr(value, "op") else value


def _has_bias(bias) -> bool:
    return isinstance(bias, relax.Expr) and isinstance(getattr(bias, "ty", None), relax.TensorType)


@converter("convolution.default")
def convolution(node, importer):
    dtype = output_dtype(node)
    if dtype == "float32":
        return importer._convolution(node)
    bb = importer.block_builder
    x = importer.env[node.args[0]]
    weight = importer.env[node.args[1]]
    bias = _arg(node, importer, 2, "bias", None)
    stride = _arg(node, importer, 3, "stride", 1)
    padding = _arg(node, importer, 4, "padding", 0)
    dilation = _arg(node, importer, 5, "dilation", 1)
    transposed = _arg(node, importer, 6, "transposed", False)
    output_padding = _arg(node, importer, 7, "output_padding", 0)
    groups = _arg(node, importer, 8, "groups", 1)
    ndim = x.ty.ndim
    if ndim not in _LAYOUTS or (transposed and ndim == 5):
        raise NotImplementedError(f"convolution: {ndim}-D input, transposed={transposed}")
    data_layout, kernel_layout, transposed_layout = _LAYOUTS[ndim]
    common = dict(
        strides=stride, padding=padding, dilation=dilation, groups=groups, data_layout=data_layout, out_dtype=dtype
    )
    if transposed:
        op = {3: relax.op.nn.conv1d_transpose, 4: relax.op.nn.conv2d_transpose}[ndim]
        out = bb.emit(op(x, weight, output_padding=output_padding, kernel_layout=transposed_layout, **common))
    else:
        op = {3: relax.op.nn.conv1d, 4: relax.op.nn.conv2d, 5: relax.op.nn.conv3d}[ndim]
        out = bb.emit(op(x, weight, kernel_layout=kernel_layout, **common))
    if not _has_bias(bias):
        return out
    bias = relax.op.reshape(bias, [1, -1] + [1] * (ndim - 2))
    return bb.emit(relax.op.add(out, bias))
