#!/usr/bin/env bash
# The Rust kernels' tests built for aarch64 on this x86-64 machine and run under qemu-user, on emulated CPUs
# without dotprod (Cortex-A72, the Raspberry Pi 4's), with it (Cortex-A76, the Pi 5's) and with i8mm and bf16
# (QEMU's `max`, SVE off: TCG emulates SVE ~40x slower). The kernels pick their instruction set at run time;
# every test checks them against the same naive references as on x86. The toolchain:
# scripts/install-system-deps.sh (Debian's rustc-web, gcc-aarch64-linux-gnu, qemu-user); the aarch64
# libtvm_ffi.so the crate links comes from PyPI's apache-tvm-ffi wheel. Emulated timings are not speed.
# About 2 min on 2 cores from a cold build (clippy, the build, three emulated runs of ~7 s); --check only checks
# that the toolchain is there.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/aarch64-env.sh
missing=$(aarch64_toolchain_missing)
if [ -n "$missing" ]; then
    echo "error: the aarch64 toolchain is missing ($missing): sudo bash scripts/install-system-deps.sh" >&2
    exit 1
fi
if [ "${1:-}" = --check ]; then  # scripts/test.sh asks whether the tier can run here
    exit 0
fi
aarch64_env  # Debian's cargo and rustc first on PATH, the aarch64 libtvm_ffi.so
aarch64_binfmt  # a test that runs itself again in a child process execs an aarch64 program
TARGET=$AARCH64_TARGET
echo "==> clippy -D warnings for $TARGET (code behind cfg(target_arch = \"aarch64\") that x86's clippy never sees)"
cargo clippy -p tvm-ext --release --locked --target "$TARGET" --all-targets --quiet -- -D warnings
echo "==> building the tvm-ext tests for $TARGET ($(rustc --version))"
binary=$(cargo test -p tvm-ext --release --locked --target "$TARGET" --no-run --message-format=json |
    python3 scripts/test_binary.py)
if [ -z "$binary" ]; then
    echo "error: cargo built no aarch64 test binary for tvm-ext" >&2
    exit 1
fi

# (QEMU CPU model, what it stands for, the instruction set the kernels must pick, the int8 and the bf16 GEMMs'
# inner loops, as the precision table names their sets: Portable = none (f32 kernels on the unpacked weights),
# Dotprod = SDOT, I8mm = USMMLA, NeonBf16 = BFDOT)
for row in "cortex-a72 Pi-4 Neon Portable Portable" "cortex-a76 Pi-5 Neon Dotprod Portable" \
    "max,sve=off i8mm+bf16 Neon I8mm NeonBf16"; do
    set -- $row
    echo "==> cargo tests of tvm-ext on an emulated aarch64 $1 ($2; kernels must pick $3, int8 $4, bf16 $5)"
    # Each exec starts a new qemu from the environment: QEMU_CPU reaches every process the tests start.
    QEMU_CPU=$1 TVM_EXT_EXPECT_ISA=$3 TVM_EXT_EXPECT_INT8=$4 TVM_EXT_EXPECT_BF16=$5 \
        qemu-aarch64 "$binary" --test-threads 2 -q
done
