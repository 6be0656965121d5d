#!/usr/bin/env bash
# Style checks, run first by scripts/test.sh: rustfmt and clippy for the Rust
# crates, ruff's formatter and linter for Python (settings in rustfmt.toml and
# pyproject.toml). Fix with: cargo fmt --all && .venv/bin/ruff format . && .venv/bin/ruff check --fix .
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"

if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
    echo "error: rustfmt and clippy are needed: rustup component add rustfmt clippy" >&2
    exit 1
fi
echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy -D warnings"
cargo clippy --workspace --all-targets --release --quiet -- -D warnings
echo "==> ruff format --check"
ruff format --check --quiet .
echo "==> ruff check"
ruff check --quiet .
