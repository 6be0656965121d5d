"""Compile Kokoro-82M for this exact CPU (or --target) into a TVM artifact (kokoro.so + weights.bin +
meta.json) that serves 1 to 510 tokens per call. Weights are found as for `say` (--weights,
$KOKORO_TVM_WEIGHTS, the HuggingFace cache, or the offline rebuild). Takes a few minutes on 2 cores.
Into the user cache (no --out), the result is preferred to a prebuilt portable library from then on, for
any weights.

--target of another architecture (an ARM CPU on an x86-64 machine: cortex-a72 for a Raspberry Pi 4,
cortex-a76 for a Pi 5, neoverse-n1 or neoverse-v1 for Graviton 2 or 3, or a level such as armv8.2-a+dotprod)
cross-compiles the library, linked by Debian's aarch64-linux-gnu-gcc (apt-get install gcc-aarch64-linux-gnu),
without weights: copy the directory to that machine, where `kokoro-tvm say --artifact DIR` binds the weights
to it on first use (seconds) and speaks.

examples:
  kokoro-tvm compile
  kokoro-tvm compile --target x86-64-v3 -o kokoro-v3
  kokoro-tvm compile --target cortex-a76 -o kokoro-pi5
  kokoro-tvm compile --target '{"kind": "llvm", "mcpu": "x86-64-v4", "mattr": ["-avx512fp16"]}'"""

from __future__ import annotations

import json
import sys

from kokoro_tvm_ext.cli.options import add_precision_argument
from kokoro_tvm_ext.model.artifact_cache import compiler_installed, ensure_artifact, target_spec
from kokoro_tvm_ext.model.compile import compile_kokoro, cross_compiler
from kokoro_tvm_ext.model.runtime.artifact import LSTM_IMPLS, holds_checkpoint, read_meta
from kokoro_tvm_ext.model.runtime.cpu_features import described, host_arch
from kokoro_tvm_ext.model.weights import find_weights, load_kmodel
from kokoro_tvm_ext.support.errors import InvalidInputError, MissingAssetError


def add_arguments(parser) -> None:
    parser.add_argument("-o", "--out", help="output directory (default: the user cache, where `say` looks)")
    parser.add_argument("--weights", help="a Kokoro .pth state_dict (default: see above)")
    parser.add_argument(
        "--lstm-impl",
        choices=LSTM_IMPLS,
        default="plugin",
        help="plugin: the Rust LSTM kernel (fast); tir: a TIR loop, for artifacts that must "
        "run without this plugin's LSTM (default: %(default)s)",
    )
    add_precision_argument(parser)
    parser.add_argument(
        "--target",
        metavar="CPU|JSON",
        help="an LLVM CPU name (x86-64-v3, znver4, cortex-a76, neoverse-n1, ...), an ARM level "
        "(armv8.2-a+dotprod) or a TVM target as a JSON object (default: this machine's CPU); an ARM CPU on an "
        "x86-64 machine is cross-compiled, without weights (see above)",
    )


def run(args) -> int:

    target = target_spec(_parse_target(args.target))
    if not compiler_installed():
        raise MissingAssetError('compiling needs torch and kokoro: pip install "kokoro-tvm-ext[compile]"')
    weights = find_weights(args.weights)
    if args.out:
        cross_compiler(target)  # a missing cross compiler is said before the model is built
        out = compile_kokoro(
            load_kmodel(weights),
            args.out,
            target=target,
            lstm_impl=args.lstm_impl,
            precision=args.precision,
            weights_fingerprint=weights.fingerprint(),
        )
    else:
        # Compiled for the target: a prebuilt portable library is not what `compile` asks for.
        out = ensure_artifact(
            weights, target=target, lstm_impl=args.lstm_impl, precision=args.precision, prebuilt=False
        )
    print(out)
    meta = read_meta(out)
    if not holds_checkpoint(meta):  # cross-compiled: it runs, and gets its weights, on the target machine
        print(
            f"kokoro-tvm: {out} is Kokoro compiled for {described(meta)}, without weights (this machine is "
            f"{host_arch()}); copy it to that machine, which has kokoro-tvm-ext {meta['kokoro_tvm_ext']} and "
            f"TVM {meta['tvm']}, and run `kokoro-tvm say --artifact DIR [--weights FILE] TEXT` there: the "
            "weights are bound to it on first use (seconds)",
            file=sys.stderr,
        )
    return 0


def _parse_target(text: str | None):
    """--target: a JSON object as a dict, anything else as an LLVM CPU name."""
    if text is None or not text.lstrip().startswith("{"):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InvalidInputError(f"--target is not valid JSON ({err}); give a CPU name or a JSON object") from None
