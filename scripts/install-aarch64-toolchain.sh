#!/usr/bin/env bash
# The toolchain that builds the Rust kernels for aarch64 on an x86-64 Debian 12 machine and runs their tests
# under emulation (scripts/test-aarch64.sh). rustup cannot fetch other targets on these machines, so Rust for
# aarch64 is Debian's: rustc-web, cargo-web and rust-web-clippy (1.96: /usr/bin/rustc, /usr/bin/cargo) with the
# aarch64 standard library (libstd-rust-web-dev:arm64). The linker is Debian's gcc-aarch64-linux-gnu; the
# emulator qemu-user (qemu-aarch64); qemu-user-static and debootstrap build the arm64 Debian root the aarch64
# wheel is installed into (scripts/arm64-root.sh). Test binaries run on the multiarch C library (libc6:arm64 in
# /lib/aarch64-linux-gnu): the cross toolchain's own copy (/usr/aarch64-linux-gnu, glibc 2.36-8cross1) hangs in
# pthread_create under Debian 12's qemu 7.2. Needs root and Debian's package mirror; ~1-2 min.
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
    echo "error: run as root (apt-get): sudo bash $0" >&2
    exit 1
fi
dpkg --add-architecture arm64
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    qemu-user qemu-user-static debootstrap gcc-aarch64-linux-gnu libc6:arm64 libgcc-s1:arm64 rustc-web cargo-web rust-web-clippy \
    libstd-rust-web-dev:arm64 >/dev/null
echo "==> aarch64 toolchain: $(/usr/bin/rustc --version), $(aarch64-linux-gnu-gcc --version | head -1), $(qemu-aarch64 --version | head -1)"
