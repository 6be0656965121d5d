#!/usr/bin/env bash
# Refresh requirements/dev.lock, the hashed lock scripts/setup.sh installs through (as constraints: any subset of
# the extras gets the locked versions): every extra of pyproject.toml's `dev` and requirements/build.in, for
# CPython >= 3.11 (torch 2.15 has no 3.10 wheels) on every platform uv knows (x86-64 and aarch64 Linux included).
# Run it after editing pyproject.toml's dependencies or requirements/build.in (tests/test_lock.py fails until
# then). Versions already in the lock are kept where they still fit; `bash scripts/lock.sh --upgrade` takes the
# newest of everything, `--upgrade-package NAME` of one. Needs .venv (scripts/setup.sh) for uv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
if ! "$PY" -m uv --version >/dev/null 2>&1; then
    echo "error: no uv in .venv: run bash scripts/setup.sh first" >&2
    exit 1
fi
LOCK=requirements/dev.lock
TMP=$(mktemp)
trap 'rm -f "$TMP"' EXIT
# uv keeps the versions of an existing output file (unless --upgrade): start from the current lock.
[ -f "$LOCK" ] && cp "$LOCK" "$TMP"
"$PY" -m uv pip compile pyproject.toml requirements/build.in --extra dev --universal --python-version 3.11 \
    --generate-hashes --custom-compile-command "bash scripts/lock.sh" --quiet -o "$TMP" "$@"
{
    echo "# inputs-sha256: $("$PY" scripts/lock_inputs.py) (scripts/lock_inputs.py)"
    grep -v '^# inputs-sha256: ' "$TMP"
} >"$LOCK"
echo "==> $LOCK: $(grep -c '^[a-z0-9]' "$LOCK") packages"
# What setup.sh --dev installs without its requirements (requirements/no-deps.in says why), hashed.
"$PY" -m uv pip compile requirements/no-deps.in --no-deps --universal --python-version 3.11 --generate-hashes \
    --custom-compile-command "bash scripts/lock.sh" --quiet -o requirements/no-deps.lock
echo "==> requirements/no-deps.lock: $(grep -c '^[a-z0-9]' requirements/no-deps.lock) packages"
