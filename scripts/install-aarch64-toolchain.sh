#!/usr/bin/env bash
# The aarch64 toolchain (Debian's rustc-web with the aarch64 standard library, gcc-aarch64-linux-gnu with its C
# library, qemu-user, qemu-user-static, debootstrap) is part of scripts/install-system-deps.sh, the one list of the
# system packages the tests and scripts need; this name stays for the docs and messages that give it.
set -euo pipefail
exec bash "$(dirname "$0")/install-system-deps.sh" "$@"
