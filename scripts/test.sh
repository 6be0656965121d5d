#!/usr/bin/env bash
# The README's test command, and CI's (.ci/run): install the system packages the tests need (as root, with
# apt-get: scripts/install-system-deps.sh), set up .venv (see setup.sh), then run every check: style (lint.sh),
# the Rust kernels' cargo tests and the pytest suite. Exits non-zero on any failure. Without root the tests whose
# tool is missing skip, each with a line naming that script.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo "==> [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }  # where CI's time goes
if ! missing=$(bash scripts/install-system-deps.sh --check); then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        step "system packages"
        bash scripts/install-system-deps.sh ||
            echo "==> could not install the system packages; the tests that need them will be skipped"
    else
        echo "==> missing system packages ($missing): the tests that need them will be skipped;" \
            "to run them: sudo bash scripts/install-system-deps.sh"
    fi
fi
bash scripts/setup.sh --dev  # every extra: the tests need serve, book, ray, bench, recognizer, pytest, ruff
export PATH="$PWD/.venv/bin:$PATH"
step "lint"
bash scripts/lint.sh

step "cargo test"
cargo test -p tvm-ext --release
if grep -qw amx_tile /proc/cpuinfo; then
    step "cargo test with AMX hidden (the VNNI and AVX512-BF16 loops this CPU would otherwise skip)"
    KOKORO_TVM_EXT_NO_AMX=1 cargo test -p tvm-ext --release
fi
if command -v qemu-x86_64 >/dev/null 2>&1; then
    step "cargo test on emulated older CPUs"
    bash scripts/test-portability.sh  # the same tests on emulated Haswell and Nehalem CPUs, ~15 s
else
    echo "==> skipping the older-CPU runs: no qemu-x86_64 (sudo bash scripts/install-system-deps.sh)"
fi
if bash scripts/test-aarch64.sh --check 2>/dev/null; then
    step "cargo clippy and test for aarch64, on emulated Cortex-A72, Cortex-A76 and max CPUs"
    bash scripts/test-aarch64.sh
else
    echo "==> skipping the aarch64 runs: no aarch64 toolchain (sudo bash scripts/install-system-deps.sh)"
fi
# The Ray cluster tests need a loopback-only network namespace: tests/book/test_ray_in_loopback.py runs
# them in one as a test of this run, so the workers share its minutes with the other files.
step "pytest: every tier, one worker per core (a file's tests share a worker and its fixtures)"
# A developer's fast tier alone: .venv/bin/python -m pytest -m unit
python -m pytest -n auto --dist loadfile --no-loadscope-reorder --durations=60 "$@"
step "done"
