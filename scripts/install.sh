#!/usr/bin/env bash
# Installs everything this project needs on Debian 12 (as root) and builds it.
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
if ! command -v clang >/dev/null || ! command -v cc >/dev/null || ! command -v etcd >/dev/null || ! [ -f /usr/include/bpf/bpf_helpers.h ] \
    || ! command -v curl >/dev/null || ! command -v iperf3 >/dev/null || ! command -v ip >/dev/null \
    || ! command -v ping >/dev/null || ! command -v nsenter >/dev/null \
    || ! command -v protoc >/dev/null || ! [ -f /usr/include/google/protobuf/descriptor.proto ] \
    || ! command -v iptables >/dev/null || ! command -v python3 >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends \
        gcc libc6-dev clang llvm libbpf-dev linux-libc-dev iproute2 etcd-server curl iperf3 iputils-ping util-linux protobuf-compiler libprotobuf-dev iptables python3 ca-certificates >/dev/null
fi

if ! command -v cargo >/dev/null; then
    echo "error: Rust (stable, via rustup) is required: cargo not found on PATH" >&2
    exit 1
fi

if ! command -v go >/dev/null; then
    echo "warning: Go not found on PATH: the tests need it (README: prerequisites)" >&2
fi

cargo build --release --workspace --locked
echo "built: $(ls target/release/ | grep -E "^(cilium|cilium-agent|cilium-cni|cilium-lab|cilium-mount|cilium-sysctlfix)$" | tr '\n' ' ')"

# The Kubernetes control plane the lab and the tests run, built from the
# release tools/k8s pins (no release binaries can be downloaded); cached,
# so this is quick after the first time.
if command -v go >/dev/null; then
    k8s_bin=$(./scripts/build-k8s.sh)
    echo "built: Kubernetes $(basename "$(dirname "$k8s_bin")") in $k8s_bin"
fi
