#!/usr/bin/env bash
# Build the release artifacts into dist/ (or the directory given as $1):
#   kokoro_tvm_ext-<version>-cp310-abi3-manylinux_2_28_x86_64.whl  (Python >= 3.10, one wheel)
#   kokoro_tvm_ext-<version>-cp310-abi3-manylinux_2_28_aarch64.whl (the same for ARM64, cross-built here with zig
#       and Debian's rustc-web where scripts/install-aarch64-toolchain.sh installed it; skipped, with a line, else)
#   kokoro_tvm_ext-<version>.tar.gz                                (sdist: needs cargo to install)
#   kokoro_tvm_ext_artifacts-<version>-py3-none-manylinux_2_29_x86_64.whl (and ..._aarch64.whl)
#       the companion wheels: Kokoro compiled for portable CPU levels, libraries only (no weights),
#       which `kokoro-tvm say` binds the weights to when this machine has compiled none of its own
#       (scripts/build_artifacts_wheel.py; the tag is the architecture and the glibc the libraries link against)
# then check the wheel's tag with PyPI's auditwheel.
#
# KOKORO_TVM_PREBUILT_LEVELS: the LLVM CPUs compiled for the companion wheels, comma-separated
# (default x86-64-v3,x86-64-v4: AVX2+FMA and AVX-512, and where the aarch64 toolchain is installed
# cortex-a72,cortex-a76: the Raspberry Pi 4 and Pi 5 / Neoverse N1 levels); empty: no companion wheel.
# Each level is a compile (1-3 min on 2 cores), kept in the user cache until the compiler's sources change.
#
# manylinux_2_28 because our runtime dependency apache-tvm is manylinux_2_28: the wheel
# cannot install anywhere TVM cannot. zig (PyPI's `ziglang`) links against glibc 2.28's
# symbol versions whatever this machine's glibc is; no container needed.
#
# libtvm_ffi.so is not bundled: it comes from the apache-tvm-ffi wheel, and a second
# copy inside our wheel would be a second FFI registry. So `auditwheel show` lists it
# as the one external library, and the check below requires that it is the only thing
# between the wheel and its tag (the extension finds it via RPATH $ORIGIN/../tvm_ffi/lib).
#
# Needs: cargo, and a Python with maturin, ziglang, auditwheel and apache-tvm-ffi
# (the `dev` extra; scripts/setup.sh's .venv has them), plus, for the companion wheel, this
# package with its `compile` extra and `wheel`. PYTHON selects it (default: .venv/bin/python
# if present, else python3). Cold build on 2 cores: about 2.5 min, plus the levels' compiles.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-dist}
COMPAT=manylinux_2_28
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
# tvm-ffi-config (asked by the build for libtvm_ffi's location) sits next to the interpreter.
PATH="$(dirname "$("$PYTHON" -c 'import sys; print(sys.executable)')"):$PATH"
export PATH

source scripts/aarch64-env.sh
aarch64_missing=$(aarch64_toolchain_missing)
DEFAULT_LEVELS=x86-64-v3,x86-64-v4
if [ -z "$aarch64_missing" ]; then  # cross-compiled (a cross gcc links them): with the toolchain only
    DEFAULT_LEVELS=$DEFAULT_LEVELS,cortex-a72,cortex-a76
fi
LEVELS=${KOKORO_TVM_PREBUILT_LEVELS-$DEFAULT_LEVELS}
modules="maturin ziglang auditwheel tvm_ffi"
if [ -n "$LEVELS" ]; then modules="$modules wheel torch kokoro kokoro_tvm_ext"; fi
missing=""
for module in $modules; do
    "$PYTHON" -c "import $module" 2>/dev/null || missing="$missing $module"
done
if [ -n "$missing" ]; then
    echo "error: $PYTHON lacks:$missing; install them with" >&2
    echo "  $PYTHON -m pip install maturin ziglang auditwheel apache-tvm-ffi==0.1.15.post2" >&2
    echo "  (and for the prebuilt levels: wheel, and this repo with its compile extra: scripts/setup.sh," >&2
    echo "  or KOKORO_TVM_PREBUILT_LEVELS= to build without them)" >&2
    exit 1
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "error: building the wheel needs Rust's cargo (https://rustup.rs)" >&2
    exit 1
fi

mkdir -p "$OUT"
rm -f "$OUT"/kokoro_tvm_ext-*.whl "$OUT"/kokoro_tvm_ext-*.tar.gz "$OUT"/kokoro_tvm_ext_artifacts-*.whl
echo "==> wheel ($COMPAT, abi3, built with zig)"
"$PYTHON" -m maturin build --release --zig --compatibility "$COMPAT" --auditwheel skip --out "$OUT"
echo "==> sdist"
"$PYTHON" -m maturin sdist --out "$OUT"

if [ -z "$aarch64_missing" ]; then
    echo "==> wheel for aarch64 ($COMPAT, abi3, cross-built with zig and Debian's rustc)"
    # zig links against glibc 2.28's symbols; Debian's cross gcc (aarch64_env's linker) would take this glibc's.
    (aarch64_env && unset CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER &&
        "$PYTHON" -m maturin build --release --zig --compatibility "$COMPAT" --auditwheel skip \
            --target "$AARCH64_TARGET" --out "$OUT")
else
    echo "==> no aarch64 wheel: the aarch64 toolchain is missing ($aarch64_missing): sudo bash scripts/install-aarch64-toolchain.sh"
fi

for wheel in "$OUT"/kokoro_tvm_ext-*-abi3-"$COMPAT"_*.whl; do
    echo "==> auditwheel show $wheel"
    "$PYTHON" -m auditwheel show "$wheel"
    "$PYTHON" scripts/check_wheel_tag.py "$wheel"
done
if [ -n "$LEVELS" ]; then
    echo "==> prebuilt libraries for $LEVELS (the companion wheel)"
    "$PYTHON" scripts/build_artifacts_wheel.py "$OUT" --levels "$LEVELS"
fi
ls -l "$OUT"
