"""``compile_kokoro``: a ``kokoro.KModel`` → one artifact serving 1..510 tokens.

Steps, each reported with its time: export the text stage (symbolic batch and
T) and the audio stage (symbolic frame count F), import both through our
converters, merge them into one IRModule (entries ``text_stage`` and
``audio_stage``), compile with the plugin's CPU pipeline, and write
``kokoro.so`` + ``weights.bin`` + ``meta.json`` atomically.

For another architecture than this machine's (an aarch64 CPU compiled for on x86-64), the library is
linked by that architecture's cross compiler (Debian's ``aarch64-linux-gnu-gcc``) and cannot run here:
its weight transforms are not run, and the artifact is library-only (``checkpoint_weights`` all 0, as
``model/prebuilt.library_only`` makes), its weights bound on the target machine by ``ensure_artifact``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from kokoro_tvm_ext import _native
from kokoro_tvm_ext.model.binding import find_token_embeddings, function_inputs, transformed_weights
from kokoro_tvm_ext.model.runtime.artifact import LIBRARY, META, write_meta
from kokoro_tvm_ext.model.runtime.cpu_features import host_arch, target_arch, target_features
from kokoro_tvm_ext.model.runtime.tvm_runtime import compiler_available
from kokoro_tvm_ext.model.runtime.weights import WEIGHTS, write_weights
from kokoro_tvm_ext.model.spec import MAX_TOKENS, SAMPLE_RATE, TOKEN_TABLES
from kokoro_tvm_ext.model.weights import load_kmodel
from kokoro_tvm_ext.plugin.native_log import quiet_harmless_warnings
from kokoro_tvm_ext.support.errors import InvalidInputError, MissingAssetError

# The C compiler that links a library for another architecture, and the Debian package that installs it.
CROSS_COMPILERS = {"aarch64": ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu")}


class _Progress:
    def __init__(self, total: int, stream):
        self.total, self.step, self.stream = total, 0, stream
        self.start = time.perf_counter()

    def __call__(self, message: str) -> None:
        self.step += 1
        elapsed = time.perf_counter() - self.start
        print(f"[{self.step}/{self.total}] {message} (t={elapsed:.0f}s)", file=self.stream, flush=True)


def _checkpoint_inputs(stages: dict, state: dict) -> dict:
    """For each function, the checkpoint tensors its weight parameters are made of (model/binding.py):
    each exported parameter by its name in the adapter, renamed to KModel's (``CHECKPOINT_NAMES``), or
    the ``weight_g``/``weight_v`` pair an adapter folded into it. Checked against the exported values."""
    from torch.export.graph_signature import InputKind

    inputs = {}
    for function, (ep, renames) in stages.items():
        entries = []
        values = ep.state_dict
        for spec in ep.graph_signature.input_specs:
            if spec.kind != InputKind.PARAMETER:
                continue
            name = next((new + spec.target[len(old) :] for old, new in renames if spec.target.startswith(old)), None)
            if name is None:
                raise RuntimeError(f"{function}: the parameter {spec.target} has no name in KModel's state_dict")
            norm = [name[: -len("weight")] + "weight_g", name[: -len("weight")] + "weight_v"]
            sources = [name] if name in state else norm if all(k in state for k in norm) else None
            if sources is None:
                raise RuntimeError(f"{function}: {spec.target} ({name}) is not in KModel's state_dict")
            value = values[spec.target].detach().cpu().numpy()
            entry = [sources, list(value.shape), str(value.dtype)]
            rebuilt = function_inputs([entry], state)[0]
            if not np.allclose(rebuilt, value, rtol=1e-5, atol=1e-7):
                raise RuntimeError(f"{function}: {spec.target} is not {' from '.join(sources)} as recorded")
            entries.append(entry)
        inputs[function] = entries
    return inputs


def _check_no_weight_is_baked_in(constants: dict, state: dict) -> None:
    """Refuse a library that carries a checkpoint tensor as a constant (an adapter that reads a weight
    around the module's attributes, where torch.export captures it as a constant): it would keep these
    weights whatever checkpoint is bound to it."""

    by_shape: dict = {}
    for key, value in state.items():
        if value.dtype.kind == "f" and value.size > 1:
            by_shape.setdefault(value.shape, []).append((key, value))
    for function, tensors in constants.items():
        for tensor in tensors:
            for key, value in by_shape.get(tuple(int(d) for d in tensor.shape), []):
                if str(tensor.dtype) == str(value.dtype) and np.array_equal(tensor.numpy(), value):
                    raise RuntimeError(f"{function} carries the checkpoint tensor {key} as a constant")


def _import_with_weights_as_parameters(ep, lstm_impl: str):
    """The stage's Relax module, its parameters the function's trailing inputs (``num_input`` set) and
    their values dropped (they come from the checkpoint when the artifact is bound)."""
    from kokoro_tvm_ext.plugin.frontend import from_exported_program

    mod = from_exported_program(ep, lstm_impl=lstm_impl, keep_params_as_input=True)
    mod["main"] = mod["main"].without_attr("params")
    return mod


def cross_compiler(target: dict | None) -> str | None:
    """The cross compiler that links a library for ``target`` (a TVM target dict; None: this machine), found on
    PATH; None where the target is of this machine's architecture. A missing one, or an architecture without
    one, is a one-line error naming what to install. Needs no TVM."""
    arch, here = target_arch(target), host_arch()
    if arch == here:
        return None
    if arch not in CROSS_COMPILERS:
        raise InvalidInputError(
            f"cannot compile Kokoro for {arch} on this {here} machine: cross-compiling links for "
            f"{', '.join(CROSS_COMPILERS)} only; compile on an {arch} machine"
        )
    compiler, package = CROSS_COMPILERS[arch]
    found = shutil.which(compiler)
    if found is None:
        raise MissingAssetError(
            f"compiling Kokoro for {arch} on this {here} machine needs the cross compiler {compiler}, not found "
            f"on PATH: apt-get install {package}"
        )
    return found


def default_target() -> dict:
    """LLVM for this machine's CPU, named explicitly.

    (TVM 0.27's LLVM 22 does not resolve ``mcpu=native`` for the wheel's
    triple and silently falls back to a generic CPU without AVX-512.)
    """
    from tvm.target import codegen

    return {"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu()}


def compile_kokoro(
    model,
    out_dir,
    *,
    target: dict | None = None,
    lstm_impl: str = "plugin",
    precision: str = "fp32",
    weights_fingerprint: str | None = None,
    quiet: bool = False,
) -> Path:
    """Compile ``model`` (a ``kokoro.KModel``) into ``out_dir``; returns the directory.

    ``lstm_impl="tir"`` builds an artifact that runs without the plugin library.
    ``precision="bf16"``: the decoder's convolutions and matmuls, except the
    ones Winograd takes (the residual blocks, faster in f32 that way), take bf16
    inputs and weights (packed now) and accumulate in f32, where the CPU has
    AVX512-BF16 or, on aarch64, bf16 (checked at run time; elsewhere they run in f32). The text
    stage stays f32, so the durations, and the audio's length, do not change;
    so does the F0 predictor, whose errors the sine source integrates
    (passes/pack_bf16.py).
    ``precision="int8"``: the decoder's convolutions and matmuls (the residual
    blocks' too: faster than f32 Winograd) take int8 weights, quantized now per
    output channel, and u8 inputs quantized per call, with int32 sums, where
    the CPU has AVX512-VNNI, or dotprod or i8mm on aarch64 (elsewhere f32 on the
    dequantized weights, with a notice at load). The text stage and the F0 predictor stay f32 as for bf16
    (passes/pack_int8.py).
    """

    if not compiler_available():
        raise RuntimeError(
            "TVM was imported without its compiler in this process (KokoroTVM loads only TVM's runtime "
            "when it comes first); compile in a new process, or `import tvm` before creating a KokoroTVM"
        )
    import torch
    import tvm
    from kokoro import KModel

    from kokoro_tvm_ext.model.adapters.stage1 import CHECKPOINT_NAMES as TEXT_NAMES
    from kokoro_tvm_ext.model.adapters.stage1 import MAX_BATCH, TextStage, export_text_stage
    from kokoro_tvm_ext.model.adapters.stage2 import CHECKPOINT_NAMES as AUDIO_NAMES
    from kokoro_tvm_ext.model.adapters.stage2 import AudioStage, export_audio_stage
    from kokoro_tvm_ext.plugin.passes.merge_modules import merge_modules
    from kokoro_tvm_ext.plugin.passes.pack_bf16 import PRECISION_ATTR, check_precision
    from kokoro_tvm_ext.plugin.passes.pipeline import cpu_pipeline

    if not isinstance(model, KModel):
        raise TypeError(f"compile_kokoro needs a kokoro.KModel, got {type(model).__name__}")
    check_precision(precision)
    out_dir = Path(out_dir)
    target = target or default_target()
    arch = target_arch(target)
    linker = cross_compiler(target)  # before the long steps: a missing one is said at once
    step = _Progress(6, open(os.devnull, "w") if quiet else sys.stderr)
    model = model.eval()
    started = time.perf_counter()
    with torch.no_grad():
        step("exporting the text stage (tokens -> durations), symbolic length")
        audio_stage = AudioStage(model).eval()  # copies what it needs before TextStage swaps LSTMs
        text_ep = export_text_stage(TextStage(model).eval(), MAX_TOKENS)
        step("exporting the audio stage (frames -> waveform), symbolic frame count")
        audio_ep = export_audio_stage(audio_stage, max_frames=None)
    step("importing both stages into Relax, their weights as parameters")
    mod = merge_modules(
        {
            "text_stage": _import_with_weights_as_parameters(text_ep, lstm_impl),
            "audio_stage": _import_with_weights_as_parameters(audio_ep, lstm_impl),
        }
    )
    state = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    checkpoint_inputs = _checkpoint_inputs(
        {"text_stage": (text_ep, TEXT_NAMES), "audio_stage": (audio_ep, AUDIO_NAMES)}, state
    )
    if precision != "fp32":
        # The durations are rounded to whole frames from the text stage: keep it f32.
        mod["text_stage"] = mod["text_stage"].with_attr(PRECISION_ATTR, "fp32")
    step(f"compiling for {target} (the longest step)")
    tvm_target = tvm.target.Target(target)
    constants: dict = {}  # the constants each function takes last, lifted out of the library
    with quiet_harmless_warnings(step.stream):
        exe = tvm.compile(
            mod, target=tvm_target, relax_pipeline=cpu_pipeline(tvm_target, precision=precision, weights=constants)
        )
    _check_no_weight_is_baked_in(constants, state)
    if linker is None:
        step(f"writing {out_dir / LIBRARY} and {WEIGHTS} (this model's weights, transformed by the library)")
        vm = tvm.runtime.vm.VirtualMachine(exe, tvm.cpu())
        weights = transformed_weights(vm, tvm, checkpoint_inputs, constants, state)
        token_embeddings = find_token_embeddings(weights, [state[name] for name in TOKEN_TABLES])
        checkpoint_weights = {f: len(weights[f]) - len(constants.get(f, [])) for f in checkpoint_inputs}
        fcompile = None
    else:  # the library cannot run here: no transforms, no weights; they are bound on an `arch` machine
        step(f"writing {out_dir / LIBRARY} for {arch} (linked by {linker}), without weights")
        weights = {**{f: [] for f in checkpoint_inputs}, **{f: list(v) for f, v in constants.items()}}
        token_embeddings = []  # found when weights are bound (model/binding.py)
        checkpoint_weights = {f: 0 for f in checkpoint_inputs}
        weights_fingerprint = None
        from tvm.support import cc

        # libm after the objects (TVM puts options before them), as g++ links it for this machine's library
        fcompile = cc.cross_compiler(linker, add_files=["-lm"])
    out_dir.mkdir(parents=True, exist_ok=True)
    # meta.json goes first and comes back last, so an interrupted write leaves an
    # artifact that reads as missing, never an old meta.json beside a new library.
    (out_dir / META).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        with quiet_harmless_warnings(step.stream, count_hidden=False):
            exe.export_library(str(Path(tmp) / LIBRARY), fcompile=fcompile)
        weights_index = write_weights(Path(tmp) / WEIGHTS, weights)
        for name in (LIBRARY, WEIGHTS):
            os.replace(Path(tmp) / name, out_dir / name)
    sine = model.decoder.generator.m_source.l_sin_gen
    write_meta(
        out_dir,
        {
            "kokoro_tvm_ext": _native.__version__,
            "tvm": tvm.__version__,
            "target": target,
            "arch": arch,
            "cpu_features": target_features(tvm_target),
            "lstm_impl": lstm_impl,
            "precision": precision,
            "max_tokens": MAX_TOKENS,
            "max_batch": MAX_BATCH,
            "n_token": int(model.bert.config.vocab_size),
            "sample_rate": SAMPLE_RATE,
            "samples_per_frame": 2 * int(sine.upsample_scale),
            "harmonics": int(sine.dim),
            "weights_fingerprint": weights_fingerprint,
            "weights_index": weights_index,
            "checkpoint_inputs": checkpoint_inputs,
            "checkpoint_weights": checkpoint_weights,
            "token_embeddings": token_embeddings,
            "compile_seconds": round(time.perf_counter() - started, 1),
        },
    )
    step(f"done: {out_dir}")
    return out_dir


def main(argv: list[str]) -> None:
    """``python -m kokoro_tvm_ext.model.compile OUT WEIGHTS TARGET_JSON LSTM_IMPL PRECISION FINGERPRINT QUIET``:
    the compile ``ensure_artifact`` runs in a child process when this one imported TVM runtime-only (a model
    loaded before another precision or target is compiled)."""
    out, weights, target, lstm_impl, precision, fingerprint, quiet = argv
    compile_kokoro(
        load_kmodel(weights),
        out,
        target=json.loads(target),
        lstm_impl=lstm_impl,
        precision=precision,
        weights_fingerprint=fingerprint or None,
        quiet=quiet == "1",
    )


if __name__ == "__main__":
    main(sys.argv[1:])
