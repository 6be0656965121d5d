#!/usr/bin/env bash
# Create .venv/ in the repo root and install kokoro-tvm-ext into it: the Rust
# plugin is built in release mode, the Python package is installed editable with
# every extra (compile, assets, bench, dev). Safe and quick to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
    echo "error: building the plugin needs Rust's cargo (https://rustup.rs)" >&2
    exit 1
fi
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi
# tvm-ffi-config, which the Rust build asks for libtvm_ffi's location, lands here.
export PATH="$PWD/.venv/bin:$PATH"
export PIP_DISABLE_PIP_VERSION_CHECK=1

echo "==> installing build requirements"
# wheel: sdist-only dependencies (docopt) are built without isolation too. uv installs the ~200 packages of
# the dev extras with pip's resolution (checked: the same versions) in a fraction of pip's time (about 3 min
# of CI's setup with pip, mostly unpacking wheels already in its cache).
python -m pip install -q "uv>=0.5,<1" "maturin>=1.7,<2" "apache-tvm-ffi==0.1.15.post2" wheel
echo "==> building the plugin and installing kokoro-tvm-ext[dev] (first run: a few minutes)"
python -m uv pip install --python .venv/bin/python -q --no-build-isolation -e ".[dev]"
echo "==> unpacking the 54 Kokoro voice packs into the user cache (kokoro==0.9.4 sdist, checked by sha256)"
.venv/bin/kokoro-tvm voices --install >/dev/null
echo "==> ready: $(.venv/bin/kokoro-tvm --version)"
