#!/usr/bin/env bash
# Runs a command in a new network namespace whose only interface is loopback (as root, or with
# unprivileged user namespaces: unshare -rn). The local Ray clusters of tests/book and
# bench/book.py start only in one: Ray probes public DNS servers for its address and otherwise
# advertises the host's own, so in here every connection stays on 127.0.0.1.
set -euo pipefail
if [ "$(id -u)" = 0 ]; then flags=(--net); else flags=(--net --map-root-user); fi
exec unshare "${flags[@]}" -- sh -c 'ip link set lo up && exec "$@"' sh "$@"
