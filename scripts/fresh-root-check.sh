#!/usr/bin/env bash
# Runs the README's install command (scripts/install.sh) inside a fresh
# Debian 12 root made with debootstrap, with nothing in it but what
# debootstrap's minbase gives and the prerequisites the README names (the
# Rust toolchain, Go), bind-mounted read-only from this machine. It passes
# once every binary and every BPF object is built there, so a package
# installed by hand on this machine can no longer hide a missing install
# step. Downloads are cached (Debian packages, crates); the root never is:
# it is made anew on every run and removed afterwards.
#
# What the root built is not thrown away where this machine has not built it
# yet (a clean clone, as in CI): the source sits at the same path in the
# root as here, so cargo's target dir and the Kubernetes and node binary
# caches move over afterwards and the install that follows finds them
# built instead of building everything a second time.
#
# As root. Usage: scripts/fresh-root-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
# The root gets a tmpfs of its own at /tmp (below), which would hide a
# copy of a checkout that lives there.
case $src/ in
/tmp/*)
    echo "fresh root: the checkout is under /tmp ($src), which the fresh root mounts a tmpfs over; clone it elsewhere" >&2
    exit 1
    ;;
esac

cache=${CILIUM_RS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cilium-rs}/fresh-root
mkdir -p "$cache/debs" "$cache/apt-archives/partial"
chmod 755 "$cache" "$cache/apt-archives"

if ! command -v debootstrap >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

# The mirror this machine's apt uses, so the root sees the same archive.
mirror=$(sed -n 's/^URIs:[[:space:]]*\(\S*debian\/\?\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
mirror=${mirror:-$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)}
mirror=${mirror:-http://deb.debian.org/debian}

sysroot=$(rustc --print sysroot)
goroot=$(command -v go >/dev/null && go env GOROOT || true)
cargo_home=${CARGO_HOME:-$HOME/.cargo}
# Go's module and build caches are shared with the root (read-write), as
# the crates are: the root still builds Kubernetes itself, but from what
# this machine compiled before, so it takes minutes, not half an hour.
gomodcache=$(command -v go >/dev/null && go env GOMODCACHE || true)
gocache=$(command -v go >/dev/null && go env GOCACHE || true)

root=$(mktemp -d /var/tmp/cilium-rs-fresh-root.XXXXXX)
chmod 755 "$root"   # a root dir, not a private temp dir: apt's _apt user walks it
cleanup() {
    # The bind mounts live in the unshared mount namespace below and are
    # gone with it; --one-file-system still guards against a stray one.
    rm -rf --one-file-system "$root"
}
trap cleanup EXIT

echo "fresh root: debootstrap bookworm (minbase) from $mirror into $root"
t0=$SECONDS
debootstrap --variant=minbase --cache-dir="$cache/debs" bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
    tail -n 30 "$root.log" >&2
    rm -f "$root.log"
    echo "fresh root: debootstrap failed" >&2
    exit 1
}
rm -f "$root.log"
echo "fresh root: made in $((SECONDS - t0)) s"

# What a machine's own apt would have: its resolver; no service may start
# inside the root (etcd's package would otherwise try).
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"

# The source tree as a clean clone has it: tracked and untracked files that
# git does not ignore, and git's own dir (the build records the revision),
# no target/; at this machine's path, so what the root builds is valid here.
mkdir -p "$root$src"
{ git ls-files -z --cached --others --exclude-standard; find .git -print0; } |
    tar -C "$src" --null --no-recursion -T - -cf - | tar -C "$root$src" -xf -

mkdir -p "$root$sysroot" "$root$cargo_home/registry"
[ -n "$goroot" ] && mkdir -p "$root$goroot" "$root/root/go/pkg/mod" "$root/root/.cache/go-build"
path=$sysroot/bin${goroot:+:$goroot/bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

t0=$SECONDS
unshare --mount --propagation private bash -euo pipefail -c '
    root=$1 sysroot=$2 goroot=$3 cargo_home=$4 cache=$5 path=$6 gomodcache=$7 gocache=$8 src=$9
    ro_bind() { mount --bind "$1" "$2"; mount -o remount,bind,ro "$2"; }
    ro_bind "$sysroot" "$root$sysroot"
    if [ -n "$goroot" ]; then
        ro_bind "$goroot" "$root$goroot"
        mkdir -p "$gomodcache" "$gocache"
        mount --bind "$gomodcache" "$root/root/go/pkg/mod"
        mount --bind "$gocache" "$root/root/.cache/go-build"
    fi
    mkdir -p "$cargo_home/registry"
    mount --bind "$cargo_home/registry" "$root$cargo_home/registry"
    mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs tmpfs "$root/tmp"
    # apt keeps the .debs it fetched in the cached archives dir
    echo "Binary::apt::APT::Keep-Downloaded-Packages \"true\";" >"$root/etc/apt/apt.conf.d/99keep"
    # git: the README clones with it, so a user has it
    chroot "$root" /usr/bin/env -i PATH="$path" DEBIAN_FRONTEND=noninteractive bash -c \
        "apt-get update -qq && apt-get install -y -qq --no-install-recommends git >/dev/null"
    chroot "$root" /usr/bin/env -i HOME=/root PATH="$path" CARGO_HOME="$cargo_home" \
        CI="${CI:-}" TERM=dumb bash -c "cd \"\$1\" && ./scripts/install.sh" install "$src"
' fresh-root "$root" "$sysroot" "$goroot" "$cargo_home" "$cache" "$path" "$gomodcache" "$gocache" "$src" || {
    echo "fresh root: ./scripts/install.sh failed on a fresh Debian 12 (a package missing from it?)" >&2
    exit 1
}
echo "fresh root: install.sh done in $((SECONDS - t0)) s"

missing=()
for bin in cilium cilium-agent cilium-cni cilium-lab cilium-mount cilium-sysctlfix; do
    [ -x "$root$src/target/release/$bin" ] || missing+=("binary $bin")
done
for obj in bpf/bpf_*.c; do
    name=$(basename "$obj" .c)
    compgen -G "$root$src/target/release/build/datapath-*/out/$name.o" >/dev/null || missing+=("BPF object $name.o")
done
if [ -n "$goroot" ]; then
    k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' tools/k8s/go.mod)
    for bin in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy; do
        [ -x "$root/root/.cache/cilium-rs/k8s/$k8s_version/bin/$bin" ] || missing+=("Kubernetes $bin")
    done
    # scripts/build-node.sh's cache dir, named after the three pins.
    containerd_version=$(awk '$1 == "github.com/containerd/containerd/v2" { print $2; exit }' tools/containerd/go.mod)
    crictl_version=$(awk '$1 == "sigs.k8s.io/cri-tools" { print $2; exit }' tools/crictl/go.mod)
    node_bin=$root/root/.cache/cilium-rs/node/k8s-${k8s_version}_containerd-${containerd_version}_crictl-${crictl_version}/bin
    for bin in kubelet kube-proxy containerd containerd-shim-runc-v2 ctr crictl agnhost pause; do
        [ -x "$node_bin/$bin" ] || missing+=("node binary $bin")
    done
    coredns_version=$(awk '$1 == "github.com/coredns/coredns" { print $2; exit }' tools/coredns/go.mod)
    coredns_bin=$root/root/.cache/cilium-rs/node/coredns-${coredns_version}/bin
    [ -x "$coredns_bin/coredns" ] || missing+=("CoreDNS")
fi
# A real node's parts from Debian: containerd's runtime and its CRI's
# loopback CNI plugin.
for file in /usr/sbin/runc /usr/lib/cni/loopback; do
    [ -x "$root$file" ] || missing+=("Debian's $file")
done
if [ ${#missing[@]} -gt 0 ]; then
    printf 'fresh root: not built: %s\n' "${missing[@]}" >&2
    exit 1
fi
echo "fresh root: every binary, BPF object${goroot:+, Kubernetes and node binary} built from a fresh Debian 12"

# Keep what this machine lacks: the install that comes next then has the
# workspace, Kubernetes and the node's binaries built (one filesystem, so a
# rename).
host_cache=$HOME/.cache/cilium-rs
keep() {
    if [ -e "$1" ] && [ ! -e "$2" ]; then
        mkdir -p "$(dirname "$2")"
        mv "$1" "$2" && echo "fresh root: kept ${2}"
    fi
}
keep "$root$src/target" "$src/target"
if [ -n "$goroot" ]; then
    keep "$root/root/.cache/cilium-rs/k8s/$k8s_version" "${CILIUM_RS_K8S_CACHE:-$host_cache/k8s}/$k8s_version"
    keep "$(dirname "$node_bin")" "${CILIUM_RS_NODE_CACHE:-$host_cache/node}/$(basename "$(dirname "$node_bin")")"
    keep "$(dirname "$coredns_bin")" "${CILIUM_RS_NODE_CACHE:-$host_cache/node}/$(basename "$(dirname "$coredns_bin")")"
fi
