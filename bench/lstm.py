"""LSTM at Kokoro's shape, side by side in one run.

Input 640, hidden 256, bidirectional, batch_first; T in {32, 128, 512}, B in {1, 8}.
Columns (milliseconds per call, medians):
- plugin: our Rust kernel, called from the Relax VM (one build, symbolic T);
- tir: our TIR time-loop fallback in the Relax VM (one build, symbolic T);
- torch: torch.nn.LSTM eager;
- stock: stock TVM 0.27 (torch decomposition unrolls every step), T <= 128 only,
  with its import + build seconds and IR line count.

Usage: python bench/lstm.py [--threads 2] [--repeat 10] [--no-stock]
"""

from __future__ import annotations

import argparse
import time

from kokoro_bench.table import machine_line, median_seconds, print_table, set_threads

INPUT, HIDDEN = 640, 256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--steps", type=int, nargs="+", default=[32, 128, 512])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--no-stock", action="store_true", help="skip stock TVM (slow to build)")
    args = parser.parse_args()
    set_threads(args.threads)

    import numpy as np
    import torch
    import tvm
    from torch import nn
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program as stock_from_exported_program

    import kokoro_tvm_ext
    from kokoro_tvm_ext.model.compile import default_target

    torch.set_num_threads(args.threads)
    target = tvm.target.Target(default_target())
    torch.manual_seed(0)
    ref = nn.LSTM(INPUT, HIDDEN, batch_first=True, bidirectional=True).eval()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(INPUT, HIDDEN, batch_first=True, bidirectional=True)
            self.lstm.load_state_dict(ref.state_dict())

        def forward(self, x):
            return self.lstm(x)[0]

    ours = kokoro_tvm_ext.use_plugin_lstm(Model().eval())
    T = torch.export.Dim("T", min=1, max=1024)
    B = torch.export.Dim("B", min=1, max=64)
    ep = torch.export.export(ours, (torch.randn(2, 8, INPUT),), dynamic_shapes=({0: B, 1: T},))
    vms = {}
    for impl in ("plugin", "tir"):
        start = time.perf_counter()
        exe = tvm.compile(kokoro_tvm_ext.from_exported_program(ep, lstm_impl=impl), target=target)
        vms[impl] = relax.VirtualMachine(exe, tvm.cpu())
        print(f"built {impl}: {time.perf_counter() - start:.1f} s (one build for every B and T)", flush=True)

    print(machine_line(args.threads))
    rows = []
    for steps in args.steps:
        for batch in args.batches:
            x = torch.randn(batch, steps, INPUT)
            x_tvm = tvm.runtime.tensor(x.numpy())
            with torch.no_grad():
                want = ref(x)[0].numpy()
            row = [steps, batch]
            for impl in ("plugin", "tir"):
                vm = vms[impl]
                err = np.abs(vm["main"](x_tvm)[0].numpy() - want).max()
                assert err < 1e-4, f"{impl} differs from torch by {err}"
                row.append(f"{1e3 * median_seconds(lambda vm=vm, x_tvm=x_tvm: vm['main'](x_tvm), args.repeat):.2f}")
            with torch.no_grad():
                torch_ms = 1e3 * median_seconds(lambda x=x: ref(x), args.repeat)
            row.append(f"{torch_ms:.2f}")
            row.append(f"{torch_ms / float(row[2]):.2f}x")
            if args.no_stock or steps > 128:
                row += ["-", "-", "-"]
            else:
                start = time.perf_counter()
                stock_ep = torch.export.export(Model().eval(), (x,))
                mod = stock_from_exported_program(stock_ep)
                lines = len(mod.script().splitlines())
                vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
                build_s = time.perf_counter() - start
                stock_s = median_seconds(lambda vm=vm, x_tvm=x_tvm: vm["main"](x_tvm), max(3, args.repeat // 3))
                row += [
                    f"{1e3 * stock_s:.2f}",
                    f"{build_s:.1f}",
                    lines,
                ]
            rows.append(row)
            print(f"  done T={steps} B={batch}", flush=True)
    print_table(
        [
            "T",
            "B",
            "plugin ms",
            "tir ms",
            "torch ms",
            "torch/plugin",
            "stock ms",
            "stock import+build s",
            "stock IR lines",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
