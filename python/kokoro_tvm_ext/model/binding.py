"""A checkpoint's tensors into a compiled library: one artifact per checkpoint, no compile.

The library takes the checkpoint's tensors as they are (``compile_kokoro`` imports the
model with its weights as parameters) and carries, per function, a
``<function>_transform_params`` that computes from them what the kernels read (permutes,
weight norm, Winograd and bf16 packing). ``meta.json`` says which checkpoint tensors each
function takes (``checkpoint_inputs``: KModel's state-dict names, shape, dtype). Binding a
checkpoint runs those functions once and writes their results, with the library's own
constants, to the artifact's ``weights.bin``, mapped as before.

Each entry of ``checkpoint_inputs`` is ``[sources, shape, dtype]``: one source is a
tensor taken as it is; two (``weight_g``, ``weight_v``) are a weight-normed weight,
``v · g / ‖v‖`` over every dim but the first, as ``torch.nn.utils.weight_norm`` computes
it (the audio stage's adapters fold it before export). Needs numpy and TVM's runtime only.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from kokoro_tvm_ext import _native  # noqa: F401  (the plugin's packers, which the transforms call whatever the LSTM)
from kokoro_tvm_ext.model.runtime.artifact import LIBRARY, META, load_checked_meta, write_meta
from kokoro_tvm_ext.model.runtime.cpu_features import check_cpu
from kokoro_tvm_ext.model.runtime.tvm_runtime import import_tvm, load_vm
from kokoro_tvm_ext.model.runtime.weights import WEIGHTS, load_weights, write_weights
from kokoro_tvm_ext.model.spec import TOKEN_TABLES
from kokoro_tvm_ext.support.cache import atomic_directory
from kokoro_tvm_ext.support.errors import ArtifactCorruptError, CheckpointMismatchError

TRANSFORM_SUFFIX = "_transform_params"


def weight_norm(g: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``g · v / ‖v‖``, the norm over every dim of ``v`` but the first (in float64, returned in v's dtype)."""
    v64 = v.astype(np.float64)
    norm = np.sqrt(np.sum(v64 * v64, axis=tuple(range(1, v.ndim)), keepdims=True))
    return (v64 * (g.astype(np.float64).reshape(norm.shape) / norm)).astype(v.dtype)


def checkpoint_problem(inputs: dict, state: dict) -> str | None:
    """What keeps ``state`` (KModel's flat names -> arrays) from fitting ``inputs``, else None."""
    needed: dict[str, tuple] = {}
    for entries in inputs.values():
        for sources, shape, _dtype in entries:
            if len(sources) == 1:
                needed[sources[0]] = tuple(shape)
            else:  # weight norm: g is [out, 1, ...], v has the weight's shape
                needed[sources[0]] = (shape[0],) + (1,) * (len(shape) - 1)
                needed[sources[1]] = tuple(shape)
    missing = sorted(k for k in needed if k not in state)
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        return f"missing {', '.join(missing[:3])}{more}"
    for key, shape in needed.items():
        array = state[key]
        found = tuple(int(d) for d in array.shape)
        if found != shape:
            return f"{key} has shape {list(found)}, the compiled model takes {list(shape)}"
        if array.dtype.kind != "f":
            return f"{key} is {array.dtype}, not a floating-point tensor"
    return None


def function_inputs(entries: list, state: dict) -> list[np.ndarray]:
    """The arrays one function's transform takes, from ``state`` (checked by ``checkpoint_problem``)."""
    arrays = []
    for sources, shape, dtype in entries:
        tensors = [np.asarray(state[k], dtype=np.float32) for k in sources]
        value = tensors[0] if len(tensors) == 1 else weight_norm(tensors[0], tensors[1].reshape(shape))
        arrays.append(np.ascontiguousarray(value.reshape(shape), dtype=dtype))
    return arrays


def transformed_weights(vm, tvm, inputs: dict, constants: dict, state: dict) -> dict[str, list]:
    """Each function's weights for ``state``: its transform's results, then the library's constants
    (``constants``: function -> the lifted constants it takes last, as compiled)."""
    problem = checkpoint_problem(inputs, state)
    if problem:
        raise CheckpointMismatchError(f"the checkpoint does not fit this compiled Kokoro: {problem}")
    weights = {name: list(values) for name, values in constants.items()}
    for function, entries in inputs.items():
        arrays = [tvm.runtime.tensor(a) for a in function_inputs(entries, state)]
        transform = function + TRANSFORM_SUFFIX
        results = vm[transform](arrays, *constants.get(transform, []))
        weights[function] = list(results) + list(constants.get(function, []))
    return weights


def find_token_embeddings(weights: dict, tables: list[np.ndarray]) -> list:
    """Where ``tables`` (the token embeddings, which token ids index) are among an artifact's ``weights``
    (function -> tensors), as ``[function, number]``: the runtime bounds token ids by their rows."""
    found = []
    for name, tensors in sorted(weights.items()):
        for number, tensor in enumerate(tensors):
            shape, dtype = tuple(int(d) for d in tensor.shape), str(tensor.dtype)
            candidates = [t for t in tables if t.shape == shape and str(t.dtype) == dtype]
            if candidates and any(np.array_equal(tensor.numpy(), table) for table in candidates):
                found.append([name, number])
    if not found:
        raise RuntimeError("the token embeddings are not among the weights (were they folded away?)")
    return found


def library_constants(meta: dict, mapped: dict) -> dict[str, list]:
    """The lifted constants of each function of an artifact (``mapped``: its weights, from ``load_weights``):
    a function's list without the leading checkpoint weights."""
    skip = meta["checkpoint_weights"]
    return {name: tensors[skip.get(name, 0) :] for name, tensors in mapped.items()}


def bind_checkpoint(base: Path, state: dict, out: Path, weights_fingerprint: str | None) -> Path:
    """The artifact ``base`` (any artifact of the library, with or without a checkpoint) with ``state``'s
    weights, written to ``out`` atomically: the library is linked (or copied), ``weights.bin`` rewritten.
    Seconds, not a compile. ``state``: KModel's flat state-dict names -> arrays."""

    tvm = import_tvm()  # TVM's runtime alone, first: importing tvm.runtime.vm before it loads the compiler (4 s)
    base, out = Path(base), Path(out)
    meta = load_checked_meta(base)
    if not meta["checkpoint_inputs"]:
        raise ArtifactCorruptError(f"{base} was compiled with its weights built in; it cannot take another checkpoint")
    check_cpu(meta, base)  # the transforms are the library's code: another architecture's is refused first

    vm = load_vm(base / LIBRARY, tvm)
    constants = library_constants(meta, load_weights(base / WEIGHTS, meta["weights_index"], tvm))
    weights = transformed_weights(vm, tvm, meta["checkpoint_inputs"], constants, state)
    fields = {}
    if not meta["token_embeddings"]:  # a library cross-compiled without running its transforms: found now
        fields["token_embeddings"] = find_token_embeddings(
            weights, [np.asarray(state[name], np.float32) for name in TOKEN_TABLES]
        )
    return write_artifact(
        out,
        base,
        weights,
        meta,
        weights_fingerprint=weights_fingerprint,
        checkpoint_weights={f: len(weights[f]) - len(constants.get(f, [])) for f in meta["checkpoint_inputs"]},
        **fields,
    )


def write_artifact(out: Path, base: Path, weights: dict, meta: dict, **fields) -> Path:
    """``base``'s library (linked, or copied across file systems) with ``weights`` (function -> tensors) as an
    artifact in ``out``, atomically; its meta.json is ``meta``'s compile-time fields with ``fields`` replacing
    theirs (file sizes, hashes and digests recomputed)."""
    with atomic_directory(out) as tmp:
        try:
            os.link(base / LIBRARY, tmp / LIBRARY)
        except OSError:
            shutil.copy2(base / LIBRARY, tmp / LIBRARY)
        index = write_weights(tmp / WEIGHTS, weights)
        record = {k: v for k, v in meta.items() if not k.startswith(("library_", "weights_", "field_", "format_"))}
        write_meta(tmp, {**record, "weights_index": index, **fields})
    return out


__all__ = ["META", "bind_checkpoint", "checkpoint_problem", "transformed_weights", "weight_norm", "write_artifact"]
