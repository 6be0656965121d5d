#!/usr/bin/env bash
# The Rust kernels' tests built for aarch64 on this x86-64 machine and run under qemu-user, on emulated CPUs
# without dotprod (Cortex-A72, the Raspberry Pi 4's), with it (Cortex-A76, the Pi 5's) and with i8mm and bf16
# (QEMU's `max`, SVE off: TCG emulates SVE ~40x slower). The kernels pick their instruction set at run time;
# every test checks them against the same naive references as on x86. The toolchain:
# scripts/install-aarch64-toolchain.sh (Debian's rustc-web, gcc-aarch64-linux-gnu, qemu-user); the aarch64
# libtvm_ffi.so the crate links comes from PyPI's apache-tvm-ffi wheel. Emulated timings are not speed.
# About 2 min on 2 cores from a cold build (clippy, the build, three emulated runs of ~7 s); --check only checks
# that the toolchain is there.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTC_AARCH64=${RUSTC_AARCH64:-/usr/bin/rustc}
CARGO_AARCH64=${CARGO_AARCH64:-/usr/bin/cargo}
missing=()
for tool in "$RUSTC_AARCH64" "$CARGO_AARCH64" aarch64-linux-gnu-gcc qemu-aarch64; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ! -e /lib/ld-linux-aarch64.so.1 ] || ! "$RUSTC_AARCH64" --print target-libdir --target aarch64-unknown-linux-gnu >/dev/null 2>&1; then
    missing+=("libc6:arm64 / libstd-rust-web-dev:arm64")
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "error: the aarch64 toolchain is missing (${missing[*]}): sudo bash scripts/install-aarch64-toolchain.sh" >&2
    exit 1
fi
if [ "${1:-}" = --check ]; then  # scripts/test.sh asks whether the tier can run here
    exit 0
fi
TARGET=aarch64-unknown-linux-gnu
DEPS=target/aarch64-deps
FFI_VERSION=$(python3 -c 'import re,sys; print(re.search(r"apache-tvm-ffi==([^\"]+)", open("pyproject.toml").read()).group(1))')

# libtvm_ffi.so for aarch64, and a tvm-ffi-config that names its directory to the crates' build scripts.
if [ ! -f "$DEPS/ffi/tvm_ffi/lib/libtvm_ffi.so" ]; then
    mkdir -p "$DEPS/wheels"
    python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_aarch64 \
        --python-version 3.11 -d "$DEPS/wheels" "apache-tvm-ffi==$FFI_VERSION"
    rm -rf "$DEPS/ffi" && mkdir -p "$DEPS/ffi"
    python3 -m zipfile -e "$DEPS"/wheels/apache_tvm_ffi-*aarch64*.whl "$DEPS/ffi"
fi
mkdir -p "$DEPS/bin"
printf '#!/bin/sh\n[ "$1" = --libdir ] && exec echo %s\necho "tvm-ffi-config (aarch64 shim): only --libdir" >&2; exit 1\n' \
    "$PWD/$DEPS/ffi/tvm_ffi/lib" >"$DEPS/bin/tvm-ffi-config"
chmod +x "$DEPS/bin/tvm-ffi-config"

cross() {
    PATH="$PWD/$DEPS/bin:/usr/bin:$PATH" RUSTC="$RUSTC_AARCH64" CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
        "$CARGO_AARCH64" "$@"
}
echo "==> clippy -D warnings for $TARGET (code behind cfg(target_arch = \"aarch64\") that x86's clippy never sees)"
cross clippy -p tvm-ext --release --locked --target "$TARGET" --all-targets --quiet -- -D warnings
echo "==> building the tvm-ext tests for $TARGET ($("$RUSTC_AARCH64" --version))"
binary=$(cross test -p tvm-ext --release --locked --target "$TARGET" --no-run --message-format=json |
    python3 scripts/test_binary.py)
if [ -z "$binary" ]; then
    echo "error: cargo built no aarch64 test binary for tvm-ext" >&2
    exit 1
fi

# (QEMU CPU model, what it stands for, the instruction set the kernels must pick)
for row in "cortex-a72 Pi-4 Neon" "cortex-a76 Pi-5 Neon" "max,sve=off i8mm+bf16 Neon"; do
    set -- $row
    echo "==> cargo tests of tvm-ext on an emulated aarch64 $1 ($2; kernels must pick $3)"
    # Each exec starts a new qemu from the environment: QEMU_CPU reaches every process the tests start.
    QEMU_CPU=$1 TVM_EXT_EXPECT_ISA=$3 qemu-aarch64 "$binary" --test-threads 2 -q
done
