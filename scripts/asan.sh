#!/usr/bin/env bash
# The kernels' cargo tests (their property tests at the FFI boundary included, see
# tvm-ext/src/tensor/fuzz/) built with AddressSanitizer: any out-of-bounds access
# or use after free aborts the run. Needs a nightly toolchain (`rustup toolchain
# install nightly`); ~3 min to build, ~30 s to run. Not part of scripts/test.sh.
# Extra arguments go to the test binary, e.g. `bash scripts/asan.sh random_calls`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "error: AddressSanitizer needs a nightly Rust toolchain: rustup toolchain install nightly" >&2
    exit 1
fi
# Its own target directory: sanitized objects must not mix with the normal build.
RUSTFLAGS="-Zsanitizer=address" CARGO_TARGET_DIR=target/asan \
    cargo +nightly test -p tvm-ext --release --lib --target x86_64-unknown-linux-gnu -- "$@"
echo "==> AddressSanitizer: no errors"
