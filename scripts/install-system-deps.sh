#!/usr/bin/env bash
# Every system package a test or script of this repo needs beyond Python and cargo, installed from Debian 12's
# mirror (root, apt-get; ~2-4 min the first time). scripts/test.sh runs it when it runs as root; elsewhere the
# tests that need a missing package skip with a line naming this script.
#   sudo bash scripts/install-system-deps.sh           install what is missing (nothing to do: no apt-get at all)
#   bash scripts/install-system-deps.sh --check        print the missing packages; exit 1 if any
# Rust for aarch64 is Debian's (rustc-web 1.96) because rustup cannot fetch other targets on these machines.
# --no-install-recommends keeps chromium's and gcc's recommendations out, so every package that is needed is
# listed here (gcc-aarch64-linux-gnu only recommends libc6-dev-arm64-cross, without which a cross link fails:
# "cannot find crti.o").
set -euo pipefail

# package | what shows it is installed (a command on PATH or a file) | who needs it
PACKAGES="
qemu-user|qemu-x86_64|scripts/test-portability.sh: the kernels' tests on emulated Haswell and Nehalem CPUs
qemu-user|qemu-aarch64|scripts/test-aarch64.sh, tests/test_cpu_features.py: aarch64 programs under emulation
qemu-user-static|/usr/lib/binfmt.d/qemu-aarch64.conf|scripts/arm64-root.sh: binfmt_misc runs the arm64 root's programs
debootstrap|debootstrap|scripts/arm64-root.sh: the arm64 Debian root of tests/aarch64
chromium|chromium|tests/serve/test_web.py: the web page in a headless browser (Playwright)
gcc-aarch64-linux-gnu|aarch64-linux-gnu-gcc|links what TVM cross-compiles for aarch64 (tests/kokoro/test_cross_compile.py, the companion wheel)
libc6-dev-arm64-cross|/usr/aarch64-linux-gnu/lib/crti.o|the cross linker's C library (crti.o, -lm)
libc6:arm64|/lib/ld-linux-aarch64.so.1|the C library aarch64 test binaries run on under qemu-user
libgcc-s1:arm64|/lib/aarch64-linux-gnu/libgcc_s.so.1|the aarch64 test binaries' unwinder
rustc-web|/usr/bin/rustc|Rust that has an aarch64 standard library (scripts/test-aarch64.sh, build-wheels.sh)
cargo-web|/usr/bin/cargo|its cargo
rust-web-clippy|/usr/bin/cargo-clippy|scripts/lint.sh's clippy, and scripts/test-aarch64.sh's on the aarch64-only code
rustfmt-web|cargo-fmt|scripts/lint.sh's cargo fmt where Rust is Debian's (rustup's cargo has its own)
libstd-rust-web-dev:arm64|/usr/lib/rustlib/aarch64-unknown-linux-gnu/lib|the aarch64 standard library
iproute2|ip|scripts/in-loopback-netns.sh: the loopback-only namespace of the Ray cluster and IPv6 guard tests
valgrind|valgrind|scripts/memcheck.sh (not run by test.sh): the kernels' FFI tests under memcheck
alsa-utils|/usr/share/sounds/alsa/Front_Center.wav|tests/speaker_encoder: real human speech (ALSA's channel-test recordings)
"

missing_packages() {
    local package probe why
    while IFS='|' read -r package probe why; do
        [ -n "$package" ] || continue
        case $probe in
            /*) [ -e "$probe" ] && continue ;;
            *) command -v "$probe" >/dev/null 2>&1 && continue ;;
        esac
        echo "$package"
    done <<<"$PACKAGES" | sort -u | tr '\n' ' ' | sed 's/ $//'
}

missing=$(missing_packages)
if [ "${1:-}" = --check ]; then
    [ -z "$missing" ] || { echo "$missing"; exit 1; }
    exit 0
fi
if [ -n "${1:-}" ]; then
    echo "usage: bash $0 [--check]" >&2
    exit 2
fi
if [ -z "$missing" ]; then
    echo "==> system packages: all installed"
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "error: installing $missing needs root and apt-get (Debian 12): sudo bash $0" >&2
    exit 1
fi
echo "==> installing the system packages: $missing"
dpkg --add-architecture arm64  # the :arm64 libraries next to this machine's (multiarch)
apt-get update -qq
# shellcheck disable=SC2086  # one word per package
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
still=$(missing_packages)
if [ -n "$still" ]; then
    echo "error: installed, but still missing what shows $still is there" >&2
    exit 1
fi
echo "==> system packages installed: $(/usr/bin/rustc --version), $(aarch64-linux-gnu-gcc --version | head -1), $(qemu-aarch64 --version | head -1)"
