#!/usr/bin/env bash
# Run the Rust kernels' tests on older x86-64 CPUs, emulated by Debian's qemu-user
# (apt-get install qemu-user): Haswell (AVX2 + FMA, no AVX-512) and Nehalem (SSE4.2,
# no AVX). The kernels pick their instruction set at run time; this shows the build,
# the gemm crate and LLVM's code take the fallbacks there instead of dying on an
# illegal instruction, and that the fallbacks agree with the tests' naive references.
# Every test runs fully emulated (no forced fallbacks): about 7 s per CPU on 2 cores,
# after the `cargo test --release` build that scripts/test.sh already did.
set -euo pipefail
cd "$(dirname "$0")/.."
QEMU=${QEMU:-qemu-x86_64}
if ! command -v "$QEMU" >/dev/null 2>&1; then
    echo "error: $QEMU not found; install Debian's qemu-user (apt-get install qemu-user)" >&2
    exit 1
fi
# The build asks tvm-ffi-config (from apache-tvm-ffi) where libtvm_ffi is.
# Added only when missing: the build scripts rerun on a changed PATH, and a PATH with it twice rebuilt the
# test binary that scripts/test.sh's `cargo test` had just built (~45 s).
case ":$PATH:" in
    *":$PWD/.venv/bin:"*) ;;
    *) if [ -x .venv/bin/tvm-ffi-config ]; then export PATH="$PWD/.venv/bin:$PATH"; fi ;;
esac

# The test binary of the tvm-ext crate, built as `cargo test --release` builds it.
binary=$(cargo test -p tvm-ext --release --no-run --message-format=json 2>/dev/null |
    python3 scripts/test_binary.py)
if [ -z "$binary" ]; then
    echo "error: cargo built no test binary for tvm-ext (run cargo test -p tvm-ext --release)" >&2
    exit 1
fi

# (qemu CPU model, the instruction set the kernels must detect on it)
for pair in "Haswell Avx2" "Nehalem Portable"; do
    set -- $pair
    echo "==> cargo tests of tvm-ext on an emulated $1 CPU (kernels must pick $2)"
    # TCG warns about Haswell's TSX/INVPCID bits, which no kernel uses.
    TVM_EXT_EXPECT_ISA=$2 "$QEMU" -cpu "$1" "$binary" -q 2> >(grep -v "TCG doesn't support" >&2)
done
