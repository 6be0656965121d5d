#!/usr/bin/env bash
# An arm64 Debian 12 root for running our aarch64 wheel on this x86-64 machine (tests/aarch64/test_arm64_install.py):
# debootstrap's minimal system with Python 3.11 and a virtualenv in /opt/venv, entered with `chroot ROOT ...`.
# The kernel runs its aarch64 programs through qemu-user-static's binfmt_misc entry, registered here if it is
# not yet (it needs the binfmt_misc file system, which a container may have to mount). Emulated programs are
# ~10-50x slower than native: QEMU_CPU=cortex-a76 (a Pi 5's CPU) keeps TCG fast, `max` emulates SVE ~40x
# slower. Needs root, debootstrap, qemu-user-static and Debian's mirror (about 3 min on 2 cores).
#   usage: sudo bash scripts/arm64-root.sh ROOT      (does nothing if ROOT is already complete)
set -euo pipefail
root=${1:?usage: bash scripts/arm64-root.sh ROOT}
if [ -x "$root/opt/venv/bin/python" ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "error: an arm64 root needs root (debootstrap, chroot, binfmt_misc): sudo bash $0 $root" >&2
    exit 1
fi
for tool in debootstrap chroot; do
    command -v "$tool" >/dev/null || {
        echo "error: $tool is missing: sudo bash scripts/install-system-deps.sh" >&2
        exit 1
    }
done
source "$(dirname "$0")/aarch64-env.sh"
aarch64_binfmt
# The host's own Debian mirror (a CI machine's may be a local one); deb.debian.org where none is configured.
mirror=$(sed -n 's/^URIs: *\([^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
mirror=${mirror:-http://deb.debian.org/debian}
building="$root.building"
rm -rf "$building"
echo "==> debootstrap: Debian 12 arm64 with Python 3.11 from $mirror into $root"
debootstrap --arch=arm64 --variant=minbase --include=python3,python3-venv bookworm "$building" "$mirror" \
    >"$building.log" 2>&1 || {
    tail -5 "$building.log" >&2
    echo "error: debootstrap failed (log: $building.log)" >&2
    exit 1
}
chroot "$building" python3 -m venv /opt/venv
rm -rf "$root" "$building.log"
mv "$building" "$root"
echo "==> arm64 root ready: chroot $root /opt/venv/bin/python"
