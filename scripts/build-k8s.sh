#!/usr/bin/env bash
# Builds the Kubernetes control plane the lab and the tests run
# (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) and
# the kubelet and kube-proxy a real node runs (scripts/build-node.sh takes
# them from here; kube-proxy only on the benchmarks' baseline nodes)
# from the k8s.io/kubernetes release tools/k8s/go.mod pins, into a cache that
# later runs reuse: ~/.cache/cilium-rs/k8s/<version>/bin (or
# $CILIUM_RS_K8S_CACHE). Prints the bin directory. Go's module and build
# caches make a rebuild after a version bump cheap.
set -euo pipefail
. "$(dirname "$0")/k8s-version-stamp.sh"
cd "$(dirname "$0")/../tools/k8s"

version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' go.mod)
[ -n "$version" ] || { echo "error: no k8s.io/kubernetes version in tools/k8s/go.mod" >&2; exit 1; }
cache=${CILIUM_RS_K8S_CACHE:-${HOME}/.cache/cilium-rs/k8s}
bin="${cache}/${version}/bin"
tools=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)

missing=()
for t in "${tools[@]}"; do
    [ -x "${bin}/${t}" ] || missing+=("$t")
done
if [ "${#missing[@]}" -gt 0 ]; then
    command -v go >/dev/null || { echo "error: Go is needed to build Kubernetes ${version} (README: prerequisites)" >&2; exit 1; }
    stamp=$(k8s_version_stamp "$version")
    mkdir -p "${bin}.tmp"
    # One go build for all: their packages compile once, on every core,
    # and the binaries link side by side.
    pkgs=()
    for t in "${missing[@]}"; do
        pkgs+=("k8s.io/kubernetes/cmd/${t}")
    done
    echo "building ${missing[*]} ${version} (first time: several minutes)" >&2
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w${stamp}" -o "${bin}.tmp/" "${pkgs[@]}"
    mkdir -p "$bin"
    mv "${bin}.tmp"/* "$bin"/
    rmdir "${bin}.tmp"
fi
echo "$bin"
