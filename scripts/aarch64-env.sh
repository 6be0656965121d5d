# Sourced by scripts/test-aarch64.sh and scripts/build-wheels.sh: the environment that builds this repo's Rust for
# aarch64 on an x86-64 machine. `aarch64_toolchain_missing` says what is missing (empty: all there);
# `aarch64_env` then fetches the aarch64 libtvm_ffi.so (PyPI's apache-tvm-ffi wheel, the version pyproject.toml
# pins) and puts first on PATH a directory where tvm-ffi-config names it, and cargo, rustc and cargo-clippy are
# Debian's rustc-web 1.96 (rustup cannot fetch the aarch64 standard library here; see
# scripts/install-system-deps.sh). Run from the repo root.
AARCH64_TARGET=aarch64-unknown-linux-gnu
AARCH64_DEPS=target/aarch64-deps

aarch64_toolchain_missing() {
    local missing=()
    for tool in /usr/bin/rustc /usr/bin/cargo /usr/bin/cargo-clippy aarch64-linux-gnu-gcc qemu-aarch64 \
        qemu-aarch64-static debootstrap; do
        command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
    done
    if [ ! -e /lib/ld-linux-aarch64.so.1 ] ||
        ! /usr/bin/rustc --print target-libdir --target "$AARCH64_TARGET" >/dev/null 2>&1; then
        missing+=("libc6:arm64 / libstd-rust-web-dev:arm64")
    fi
    # gcc-aarch64-linux-gnu only recommends its C library: without it a cross link cannot find crti.o or -lm.
    [ -e /usr/aarch64-linux-gnu/lib/crti.o ] || missing+=("libc6-dev-arm64-cross")
    echo "${missing[*]}"
}

aarch64_env() {
    local version ffi="$AARCH64_DEPS/ffi/tvm_ffi/lib"
    version=$(python3 -c 'import re; print(re.search(r"apache-tvm-ffi==([^\"]+)", open("pyproject.toml").read())[1])')
    if [ ! -f "$ffi/libtvm_ffi.so" ]; then
        mkdir -p "$AARCH64_DEPS/wheels"
        python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_aarch64 \
            --python-version 3.11 -d "$AARCH64_DEPS/wheels" "apache-tvm-ffi==$version"
        rm -rf "$AARCH64_DEPS/ffi" && mkdir -p "$AARCH64_DEPS/ffi"
        python3 -m zipfile -e "$AARCH64_DEPS"/wheels/apache_tvm_ffi-*aarch64*.whl "$AARCH64_DEPS/ffi"
    fi
    mkdir -p "$AARCH64_DEPS/bin"
    printf '#!/bin/sh\n[ "$1" = --libdir ] && exec echo %s\necho "tvm-ffi-config (aarch64 shim): only --libdir" >&2; exit 1\n' \
        "$PWD/$ffi" >"$AARCH64_DEPS/bin/tvm-ffi-config"
    chmod +x "$AARCH64_DEPS/bin/tvm-ffi-config"
    for tool in cargo rustc cargo-clippy; do
        ln -sf "/usr/bin/$tool" "$AARCH64_DEPS/bin/$tool"
    done
    export PATH="$PWD/$AARCH64_DEPS/bin:$PATH" RUSTC=/usr/bin/rustc
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
}

# Registers qemu-user-static's binfmt_misc entry for aarch64 programs if it is not yet (needs root, and the
# binfmt_misc file system, which a container may have to mount): the kernel then runs an aarch64 program that an
# emulated one execs (a test that runs itself again in a child) through qemu too. Says why on failure.
aarch64_binfmt() {
    local binfmt=/proc/sys/fs/binfmt_misc conf=/usr/lib/binfmt.d/qemu-aarch64.conf
    [ -e "$binfmt/qemu-aarch64" ] && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "error: aarch64 programs are not registered with binfmt_misc, which needs root: sudo bash $0" >&2
        return 1
    fi
    [ -f "$conf" ] || {
        echo "error: no $conf: sudo bash scripts/install-system-deps.sh (qemu-user-static)" >&2
        return 1
    }
    [ -e "$binfmt/register" ] || mount -t binfmt_misc binfmt_misc "$binfmt" || {
        echo "error: cannot mount binfmt_misc at $binfmt (a container without the privilege to)" >&2
        return 1
    }
    cat "$conf" >"$binfmt/register"
}
