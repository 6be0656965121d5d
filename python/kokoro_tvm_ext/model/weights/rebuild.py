"""Rebuild a float ``kokoro.KModel`` state_dict from Kokoro-82M's int8 ONNX export, with numpy and onnx only.

Every weight is found through the ONNX node that consumes it, never through the
initializer's name alone: the exporter deduplicated constants, so a name such as
``decoder...decode.2.norm2.fc.weight_zero_point`` is also what BERT's ffn reads.
A node's scope (``/encoder/F0.0/conv1/Conv_quant``) is matched against KModel's module
names by the shortest unique dotted suffix (``F0.0.conv1`` -> ``predictor.F0.0.conv1``).

The conversions (shared/NOTES.md section 3):

* ``MatMulInteger``: int8 [in, out] weight, per-output-channel scale and zero point ->
  ``(q - zp) * scale``, transposed to torch's [out, in].
* ``ConvInteger``: uint8 weight, per-tensor scale and zero point (asymmetric). Weight norm
  was folded into the export, so a weight-normed conv gets ``weight_v = W`` and
  ``weight_g = ||W||`` over each output slice; an all-zero slice gets ``v = 1, g = 0``
  (``v = 0`` would make ``g * v / ||v||`` NaN).
* float ``Conv`` / ``ConvTranspose`` (conv_post, ups, the depthwise ``pool``): the folded
  weight, split the same way. torch's ``weight_norm`` uses dim 0 for ConvTranspose too.
* ``DynamicQuantizeLSTM``: W [2, in, 4H] and R [2, H, 4H], int8 with a scale and zero point
  per direction -> transposed to [4H, in] and gates reordered from ONNX (i, o, f, c) to
  torch (i, f, g, o); B [2, 8H] splits into ``bias_ih`` (first 4H) and ``bias_hh``.
* quantized ``Gather`` + ``DequantizeLinear`` (embeddings): per-tensor dequantization.
* float parameters the graph still names (biases, LayerNorm, Snake alphas) are read by name
  and shape-checked.

Two groups of KModel parameters are absent from the export and filled deterministically:

* ``InstanceNorm1d`` affine parameters (kokoro sets ``affine=True`` only as an export
  workaround; hexgrad's own checkpoint does not train them) -> weight 1, bias 0 (identity).
* ``bert.pooler`` -> zeros. Kokoro reads only ALBERT's last hidden state, never the pooler,
  so its value cannot affect the output; zeros keep strict loading working and the file
  reproducible.

Any other KModel parameter left without a value is an error, as is an ONNX weight
node that matches no module or a parameter fed two different initializers.
"""

from __future__ import annotations

import re
from collections import defaultdict
from contextlib import nullcontext

import numpy as np

from kokoro_tvm_ext.model.weights.layout import layout_for
from kokoro_tvm_ext.support.cache import Progress
from kokoro_tvm_ext.support.errors import CorruptAssetError

# Bump when the conversion or the stored format changes: the cache key includes it.
# 2: stored as safetensors (flat names), rebuilt without torch; the same float32 values as 1.
REBUILD_VERSION = 2

ONNX_GATES_TO_TORCH = (0, 2, 3, 1)  # ONNX blocks i,o,f,c -> torch blocks i,f,g,o
_SKIP_SCOPES = ("/stft/",)  # the export's own STFT constants, not KModel parameters


class _Graph:
    def __init__(self, model) -> None:
        from onnx import numpy_helper

        self._to_array = numpy_helper.to_array
        self.nodes = list(model.graph.node)
        self.inits = {i.name: i for i in model.graph.initializer}
        self._arrays: dict[str, np.ndarray] = {}
        self.consumers: dict[str, list] = defaultdict(list)
        self.producer: dict[str, object] = {}
        for n in self.nodes:
            for x in n.input:
                self.consumers[x].append(n)
            for y in n.output:
                self.producer[y] = n

    def array(self, name: str) -> np.ndarray:
        if name not in self._arrays:
            self._arrays[name] = self._to_array(self.inits[name])
        return self._arrays[name]

    def is_init(self, name: str) -> bool:
        return name in self.inits

    def optional(self, node, index: int) -> np.ndarray:
        """An optional initializer input (a zero point), 0 when absent."""
        if len(node.input) > index and node.input[index]:
            return self.array(node.input[index])
        return np.zeros((), np.float32)

    def weight_scale(self, node) -> np.ndarray:
        """The weight scale of a MatMulInteger / ConvInteger node: follow its output
        (through an int bias Add and the Cast) to the Mul by ``x_scale * w_scale``."""
        frontier = list(node.output)
        for _ in range(4):
            nxt = []
            for out in frontier:
                for c in self.consumers.get(out, []):
                    if c.op_type == "Mul":
                        other = c.input[1] if c.input[0] == out else c.input[0]
                        if self.is_init(other):
                            return self.array(other)
                        prod = self.producer.get(other)
                        if prod is not None and prod.op_type == "Mul":
                            inits = [x for x in prod.input if self.is_init(x)]
                            if len(inits) == 1:
                                return self.array(inits[0])
                    elif c.op_type in ("Add", "Cast", "Reshape"):
                        nxt.extend(c.output)
            frontier = nxt
        raise CorruptAssetError(f"cannot find the weight scale of ONNX node {node.name}")


def _scope_suffixes(node_name: str) -> list[str]:
    """``/encoder/bert/.../attention/query_3/MatMul_quant`` -> ['query', 'attention.query', ...]."""
    comps = [re.sub(r"_\d+$", "", c) for c in node_name.split("/") if c][:-1]
    merged: list[str] = []
    for c in comps:  # "cnn.0" then "cnn.0.0": the inner name is already qualified
        if merged and c.startswith(merged[-1] + "."):
            merged[-1] = c
        else:
            merged.append(c)
    return [".".join(merged[i:]) for i in range(len(merged) - 1, -1, -1)]


def _resolve(node_name: str, modules: set[str]) -> str | None:
    for suffix in _scope_suffixes(node_name):
        hits = [m for m in modules if m == suffix or m.endswith("." + suffix)]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            return None
    return None


def _split_weight_norm(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(v, g) with g * v / ||v|| == w, norms over every dim but 0; all-zero slices -> v=1, g=0."""
    norm = np.sqrt(np.sum(np.square(w, dtype=np.float64), axis=tuple(range(1, w.ndim)), keepdims=True))
    zero = norm == 0
    v = np.where(zero, 1.0, w).astype(np.float32)
    return v, norm.astype(np.float32)


def _dequant(q: np.ndarray, zero_point: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return ((q.astype(np.float32) - zero_point.astype(np.float32)) * scale.astype(np.float32)).astype(np.float32)


class _Builder:
    def __init__(self, shapes: dict[str, tuple[int, ...]]) -> None:
        self.shapes = shapes
        self.values: dict[str, np.ndarray] = {}
        self.origin: dict[str, str] = {}

    def modules_with(self, *suffixes: str, ndim: int | None = None) -> set[str]:
        out = set()
        for key, shape in self.shapes.items():
            for s in suffixes:
                if key.endswith("." + s) and (ndim is None or len(shape) == ndim):
                    out.add(key[: -len(s) - 1])
        return out

    def put(self, key: str, value: np.ndarray, origin: str) -> None:
        if key not in self.shapes:
            raise CorruptAssetError(f"ONNX {origin} maps to {key}, which KModel does not have")
        if tuple(value.shape) != self.shapes[key]:
            raise CorruptAssetError(
                f"ONNX {origin} gives {key} the shape {tuple(value.shape)}, KModel wants {self.shapes[key]}"
            )
        if key in self.origin:
            if self.origin[key] == origin or np.array_equal(self.values[key], value):
                return  # a shared module (ALBERT's one layer) seen again
            raise CorruptAssetError(f"{key} is fed by two different ONNX tensors: {self.origin[key]} and {origin}")
        self.values[key] = np.require(value, np.float32, ["C", "W", "O"])
        self.origin[key] = origin

    def put_conv(self, module: str, w: np.ndarray, origin: str) -> None:
        if module + ".weight_v" in self.shapes:
            v, g = _split_weight_norm(w)
            self.put(module + ".weight_v", v, origin)
            self.put(module + ".weight_g", g, origin)
        else:
            self.put(module + ".weight", w, origin)


def _check_name(init_name: str, key: str) -> None:
    """Where the initializer still carries a parameter path, it must agree with the scope."""
    m = re.fullmatch(r"(?:encoder\.|decoder\.decoder\.)(.+)\.weight_quantized", init_name)
    if m is None:
        return
    named = m.group(1) if init_name.startswith("encoder.") else "decoder." + m.group(1)
    if not key.startswith(named + ".") and key != named + ".weight":
        raise CorruptAssetError(f"ONNX initializer {init_name} resolved by scope to {key}: they disagree")


def convert(model, shapes: dict[str, tuple[int, ...]], inorms: set[str]) -> dict[str, np.ndarray]:
    """Flat ``{KModel key: float32 array}`` from a loaded ``onnx.ModelProto``."""
    g = _Graph(model)
    b = _Builder(shapes)
    linears = b.modules_with("weight", ndim=2)
    convs = b.modules_with("weight", "weight_v", ndim=3)
    lstms = b.modules_with("weight_ih_l0")

    def need(node, modules, what):
        mod = _resolve(node.name, modules)
        if mod is None:
            raise CorruptAssetError(f"ONNX {what} node {node.name} matches no KModel module")
        return mod

    for n in g.nodes:
        op = n.op_type
        if any(s in n.name for s in _SKIP_SCOPES):
            continue
        if op == "MatMulInteger" and g.is_init(n.input[1]):
            mod = need(n, linears, op)
            w = _dequant(g.array(n.input[1]), g.optional(n, 3), g.weight_scale(n)).T
            _check_name(n.input[1], mod + ".weight")
            b.put(mod + ".weight", w, n.input[1])
        elif op == "ConvInteger" and g.is_init(n.input[1]):
            mod = need(n, convs, op)
            _check_name(n.input[1], mod + ".weight")
            b.put_conv(mod, _dequant(g.array(n.input[1]), g.optional(n, 3), g.weight_scale(n)), n.input[1])
        elif op in ("Conv", "ConvTranspose") and g.is_init(n.input[1]):
            mod = need(n, convs, op)
            b.put_conv(mod, g.array(n.input[1]), n.input[1])
            if len(n.input) > 2 and n.input[2] and g.is_init(n.input[2]):
                b.put(mod + ".bias", g.array(n.input[2]), n.input[2])
        elif op == "MatMul" and g.is_init(n.input[1]):
            mod = need(n, linears, op)
            b.put(mod + ".weight", g.array(n.input[1]).T, n.input[1])
        elif op == "Gather" and g.is_init(n.input[0]) and g.array(n.input[0]).dtype == np.int8:
            mod = need(n, linears, "quantized Gather")
            deq = [c for c in g.consumers[n.output[0]] if c.op_type == "DequantizeLinear"]
            if len(deq) != 1:
                raise CorruptAssetError(f"ONNX node {n.name}: expected one DequantizeLinear after it")
            d = deq[0]
            _check_name(n.input[0], mod + ".weight")
            b.put(mod + ".weight", _dequant(g.array(n.input[0]), g.optional(d, 2), g.array(d.input[1])), n.input[0])
        elif op == "DynamicQuantizeLSTM":
            mod = need(n, lstms, op)
            _put_lstm(g, b, n, mod)

    # Float parameters the export still names: encoder.<key> / decoder.decoder.<key minus "decoder.">.
    for key in shapes:
        if key in b.values:
            continue
        head = key.split(".", 1)[0]
        name = "decoder.decoder." + key.split(".", 1)[1] if head == "decoder" else "encoder." + key
        if g.is_init(name):
            arr = g.array(name)
            if arr.dtype == np.float32 and tuple(arr.shape) == shapes[key]:
                b.put(key, arr, name)

    # Parameters the export dropped; see the module docstring.
    for key, shape in shapes.items():
        if key in b.values:
            continue
        module, leaf = key.rsplit(".", 1)
        if module in inorms and leaf in ("weight", "bias"):
            b.put(key, np.full(shape, 1.0 if leaf == "weight" else 0.0, np.float32), "identity InstanceNorm")
        elif module == "bert.pooler":
            b.put(key, np.zeros(shape, np.float32), "unused pooler")

    missing = [k for k in shapes if k not in b.values]
    if missing:
        raise CorruptAssetError(
            f"the ONNX model left {len(missing)} KModel parameters without a value: {', '.join(missing[:8])}"
            + (" ..." if len(missing) > 8 else "")
        )
    return b.values


def _put_lstm(g: _Graph, b: _Builder, n, mod: str) -> None:
    inp = list(n.input) + [""] * (12 - len(n.input))
    w_q, r_q, bias = g.array(inp[1]), g.array(inp[2]), g.array(inp[3])
    w_s, w_zp, r_s, r_zp = (g.array(inp[i]) for i in (8, 9, 10, 11))
    hidden = r_q.shape[1]

    def reorder(m: np.ndarray) -> np.ndarray:  # [4H, ...] in ONNX gate order -> torch order
        blocks = np.split(m, 4, axis=0)
        return np.concatenate([blocks[i] for i in ONNX_GATES_TO_TORCH], axis=0)

    for d, suffix in enumerate(("", "_reverse")):
        w = _dequant(w_q[d], w_zp.reshape(-1)[d], w_s.reshape(-1)[d]).T  # [4H, in]
        r = _dequant(r_q[d], r_zp.reshape(-1)[d], r_s.reshape(-1)[d]).T  # [4H, H]
        b.put(f"{mod}.weight_ih_l0{suffix}", reorder(w), inp[1])
        b.put(f"{mod}.weight_hh_l0{suffix}", reorder(r), inp[2])
        b.put(f"{mod}.bias_ih_l0{suffix}", reorder(bias[d, : 4 * hidden]), inp[3])
        b.put(f"{mod}.bias_hh_l0{suffix}", reorder(bias[d, 4 * hidden :]), inp[3])


def rebuild_state_dict(onnx_bytes: bytes, config: dict, progress: Progress | None = None) -> dict[str, np.ndarray]:
    """The flat float32 state_dict (``{"bert.embeddings...": array}``) for ``kokoro.KModel`` from the
    int8 ONNX bytes: numpy and onnx only, KModel's shapes from the bundled table (:mod:`.layout`)."""
    import onnx

    step = progress.step if progress else (lambda _msg: nullcontext())
    layout = layout_for(config)
    with step("parsing the int8 ONNX graph"):
        model = onnx.load_from_string(onnx_bytes)
    with step("dequantizing into float KModel weights"):
        return convert(model, layout.shapes, set(layout.instance_norms))
