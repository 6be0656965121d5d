#!/usr/bin/env bash
# Set up .venv (see setup.sh), then run every test: the Rust kernels' cargo
# tests and the pytest suite. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

echo "==> cargo test"
cargo test -p tvm-ext --release
echo "==> pytest"
python -m pytest "$@"
