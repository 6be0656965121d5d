#!/usr/bin/env bash
# The kernels' property tests at the FFI boundary (every `random_calls_*` test,
# see tvm-ext/src/tensor/fuzz/) under valgrind's memcheck: any invalid read or
# write, use of uninitialised memory or crash fails the run. Not part
# of scripts/test.sh (it takes several minutes). Extra arguments go to the test
# binary, e.g. `bash scripts/memcheck.sh snake::`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
if ! command -v valgrind >/dev/null 2>&1; then
    echo "error: valgrind is needed: apt-get install -y valgrind" >&2
    exit 1
fi
echo "==> building the tvm-ext test binary (release, with debug info)"
bin=$(CARGO_PROFILE_RELEASE_DEBUG=line-tables-only cargo test -p tvm-ext --release --lib --no-run \
    --message-format=json 2>/dev/null |
    python -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "tvm_ext":
        print(m["executable"])')
echo "==> valgrind memcheck: $bin"
export LD_LIBRARY_PATH="$(tvm-ffi-config --libdir)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# One test thread and a one-thread kernel pool keep the run deterministic (and shorter).
TVM_NUM_THREADS=1 RAYON_NUM_THREADS=1 valgrind --tool=memcheck --error-exitcode=1 \
    --leak-check=no --track-origins=no -q \
    "$bin" --test-threads=1 "${@:-random_calls}"
echo "==> memcheck: no errors"
