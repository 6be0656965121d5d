"""Prove the plugin works inside TVM: compile a small Relax program whose first
step is a Rust kernel (Snake, from Kokoro's vocoder) called through
R.call_dps_packed, run it at two lengths from one build, and check it against numpy."""

from __future__ import annotations

import time

import numpy as np

import kokoro_tvm_ext


def add_arguments(parser) -> None:
    parser.add_argument("--channels", type=int, default=128, help="channels (default: %(default)s)")
    parser.add_argument(
        "--lengths", type=int, nargs="+", default=[1000, 4096], help="sequence lengths to run (default: %(default)s)"
    )


def run(args) -> int:
    import tvm
    from tvm import relax
    from tvm.script import ir as I
    from tvm.script import relax as R
    from tvm.script import tirx as T

    @I.ir_module
    class SnakeResidual:
        @R.function
        def main(x: R.Tensor((1, "c", "n"), "float32"), alpha: R.Tensor((1, "c", 1), "float32")):
            c = T.int64()
            n = T.int64()
            with R.dataflow():
                y = R.call_dps_packed("kokoro_tvm_ext.snake", (x, alpha), out_ty=R.Tensor((1, c, n), "float32"))
                z = R.add(y, x)
                R.output(z)
            return z

    print(f"plugin functions: {', '.join(kokoro_tvm_ext.registered_functions())}")
    start = time.perf_counter()
    exe = tvm.compile(SnakeResidual, target=tvm.target.Target({"kind": "llvm"}))
    vm = relax.VirtualMachine(exe, tvm.cpu())
    print(f"compiled once, symbolic length, in {time.perf_counter() - start:.2f} s")
    rng = np.random.default_rng(0)
    worst = 0.0
    for n in args.lengths:
        x = rng.standard_normal((1, args.channels, n)).astype(np.float32)
        alpha = rng.uniform(0.2, 2.0, (1, args.channels, 1)).astype(np.float32)
        got = vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(alpha)).numpy()
        want = 2 * x + np.sin(alpha * x) ** 2 / alpha
        err = float(np.max(np.abs(got - want)))
        worst = max(worst, err)
        print(f"  length {n:>6}: max |TVM - numpy| = {err:.2e}")
    ok = worst < 1e-4
    print("OK: the Rust kernel ran inside the Relax VM" if ok else "MISMATCH against numpy")
    return 0 if ok else 1
