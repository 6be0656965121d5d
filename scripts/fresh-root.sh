#!/usr/bin/env bash
# The README's two commands in a Debian 12 (amd64) root that never had this project: debootstrap's minimal system
# plus only what the README asks of a user (Python >= 3.11 with venv, Rust's cargo; git, which made the clone),
# a clean `git clone` of this repo's HEAD, then, timed and logged:
#   1. bash scripts/setup.sh && .venv/bin/kokoro-tvm say "Hello from TVM, running Kokoro on a plain CPU." -o hello.wav
#   2. bash scripts/test.sh     (as root there, so it installs scripts/install-system-deps.sh's packages itself)
# cargo is Debian's cargo-web (1.96, bookworm-security): bookworm's `cargo` is 1.63, too old for Cargo.lock v4 and
# our crates, and rustup cannot be reached from these machines. The arm64 tier inside needs /proc (nested
# chroot), binfmt_misc, and /dev/shm for Chromium: mounted here, unmounted on exit.
#   usage: sudo bash scripts/fresh-root.sh DIR [--first-only] [--reuse-root]
#     DIR           the root (DIR/root, built anew) and the log (DIR/fresh-root.log)
#     --first-only  stop after command 1
#     --reuse-root  keep DIR/root's system (and any system packages a previous test.sh installed there), only
#                   its user's caches (~/.cache, ~/.cargo) and the clone made anew
# Costs on 2 cores: the root 70 s, command 1 3.8 min (idle; 4.6 and 14.4 min under a load of ~7): docs/install.md.
set -euo pipefail
usage="usage: sudo bash scripts/fresh-root.sh DIR [--first-only] [--reuse-root]"
dir=${1:?$usage}
shift
first_only="" reuse=""
for option in "$@"; do
    case $option in
        --first-only) first_only=1 ;;
        --reuse-root) reuse=1 ;;
        *) echo "$usage" >&2 && exit 2 ;;
    esac
done
if [ "$(id -u)" != 0 ]; then
    echo "error: a fresh root needs root (debootstrap, chroot, mount): sudo bash $0 $*" >&2
    exit 1
fi
command -v debootstrap >/dev/null || {
    echo "error: debootstrap is missing: sudo bash scripts/install-system-deps.sh" >&2
    exit 1
}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
root=$dir/root
log=$dir/fresh-root.log
: >"$log"
say() { echo "==> [$(date -u +%H:%M:%S)] $*" | tee -a "$log"; }

# The host's Debian mirror and suites (bookworm-security carries cargo-web 1.96).
sources=/etc/apt/sources.list.d/debian.sources
mirror=$(sed -n 's/^URIs: *\([^ ]*\/debian\)$/\1/p' "$sources" 2>/dev/null | head -1)
mirror=${mirror:-http://deb.debian.org/debian}
if grep -q " $root/" /proc/mounts; then  # a run killed before its unmount: rm -rf would reach the host's /dev
    echo "error: mounts left under $root (umount -R $root/dev $root/proc $root/sys first)" >&2
    exit 1
fi
if [ -z "$reuse" ] || [ ! -x "$root/usr/bin/python3" ]; then
    rm -rf "$root"
    say "debootstrap: Debian 12 amd64 minbase with python3, python3-venv from $mirror"
    start=$SECONDS
    debootstrap --arch=amd64 --variant=minbase --include=python3,python3-venv bookworm "$root" "$mirror" \
        >>"$log" 2>&1 || {
        tail -5 "$log" >&2
        exit 1
    }
    if [ -f "$sources" ]; then
        cp "$sources" "$root/etc/apt/sources.list.d/debian.sources" && rm -f "$root/etc/apt/sources.list"
    fi
    say "debootstrap done in $((SECONDS - start)) s"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
if [ ! -x "$root/usr/bin/cargo" ] || [ ! -x "$root/usr/bin/git" ]; then
    # The user's Rust (cargo-web pulls rustc-web, gcc and ca-certificates) and git, which made their clone
    # (tests/test_doc_paths.py lists the repo's files with it).
    say "installing cargo-web and git"
    start=$SECONDS
    chroot "$root" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cargo-web git' \
        >>"$log" 2>&1
    say "installed in $((SECONDS - start)) s: $(chroot "$root" python3 --version), $(chroot "$root" cargo --version)"
fi
# What an installed Debian has and debootstrap leaves out: localhost (the tests' servers listen there).
[ -f "$root/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
# This machine's network, as a user's machine has its own: the CA certificates added here (a TLS-inspecting
# egress proxy signs PyPI's and crates.io's certificates) and the variables that point pip, uv and cargo at them.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >>"$log" 2>&1
fi
trust=()
for var in SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE PIP_CERT CURL_CA_BUNDLE; do
    if [ -n "${!var:-}" ]; then trust+=("$var=${!var}"); fi
done

mounted=()
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
mount_in() {  # mount ARGS... TARGET, remembered for the unmount
    local target=${*: -1}
    mountpoint -q "$target" && return
    mount "$@"
    mounted+=("$target")
}
mount_in -t proc proc "$root/proc"
mount_in -t sysfs sysfs "$root/sys"
mount_in --rbind /dev "$root/dev"
mount_in -t binfmt_misc binfmt_misc "$root/proc/sys/fs/binfmt_misc" || true  # arm64-root.sh says if it lacks it

# A clean clone of what is committed, as a user gets it (nothing untracked, no target/ or .venv/), by a user
# without caches (a reused root's previous run left its uv, pip, cargo and kokoro-tvm caches in ~).
work=/root/kokoro-tvm-ext
rm -rf "$root$work" "$root/root/.cache" "$root/root/.cargo"
git clone -q --no-hardlinks "$repo" "$root$work"
say "cloned $(git -C "$root$work" log -1 --format='%h %s' | cut -c1-80) into $work"

inside() {  # a login-like environment: nothing else of this machine's (no PIP_FIND_LINKS, rustup or pyenv)
    chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb "${trust[@]}" \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin bash -c "cd $work && $1"
}
run() {
    local start=$SECONDS status=0
    say "inside: $1"
    inside "$1" >>"$log" 2>&1 || status=$?
    say "exit $status after $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s: $1"
    return "$status"
}
run 'bash scripts/setup.sh && .venv/bin/kokoro-tvm say "Hello from TVM, running Kokoro on a plain CPU." -o hello.wav'
if [ -n "$first_only" ]; then
    exit 0
fi
run 'bash scripts/test.sh'
