#!/usr/bin/env bash
# Installs everything this project needs on Debian 12 (as root) and builds it.
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
# A real Kubernetes node's parts from Debian: runc (containerd's runtime) and
# the CNI plugins (containerd's CRI needs loopback; a benchmark, bridge and
# host-local). The files of our container images are copied from installed
# packages, so those are here too: the shell and tools the e2e tests exec in
# agnhost's image (upstream's Alpine one carries bash, curl, netcat-openbsd,
# dig, iproute2 and iperf 2; busybox's nc refuses -v) and busybox's.
node_packages=(runc containernetworking-plugins bash coreutils util-linux mount iproute2 iptables findutils grep sed
    curl netcat-openbsd bind9-dnsutils iperf busybox-static kmod)
node_files=(/usr/sbin/runc /usr/lib/cni/loopback /usr/lib/cni/bridge /usr/lib/cni/host-local /bin/bash /bin/ls /bin/mount
    /usr/bin/find /bin/grep /bin/sed /bin/nc.openbsd /usr/bin/dig /usr/bin/iperf /bin/busybox /bin/kmod)
node_missing=false
for f in "${node_files[@]}"; do
    [ -e "$f" ] || node_missing=true
done
if ! command -v clang >/dev/null || ! command -v cc >/dev/null || ! command -v etcd >/dev/null || ! [ -f /usr/include/bpf/bpf_helpers.h ] \
    || ! command -v curl >/dev/null || ! command -v iperf3 >/dev/null || ! command -v ip >/dev/null \
    || ! command -v ping >/dev/null || ! command -v nsenter >/dev/null || ! command -v sysctl >/dev/null \
    || ! command -v protoc >/dev/null || ! [ -f /usr/include/google/protobuf/descriptor.proto ] \
    || ! command -v iptables >/dev/null || ! command -v python3 >/dev/null || $node_missing; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends \
        gcc libc6-dev clang llvm libbpf-dev linux-libc-dev iproute2 etcd-server curl iperf3 iputils-ping util-linux protobuf-compiler libprotobuf-dev iptables python3 ca-certificates procps \
        "${node_packages[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
    echo "error: Rust (stable, via rustup) is required: cargo not found on PATH" >&2
    exit 1
fi

if ! command -v go >/dev/null; then
    echo "warning: Go not found on PATH: the tests need it (README: prerequisites)" >&2
fi

cargo build --release --workspace --locked
# the cilium-cni that ships, built for musl (the script says why)
./scripts/build-cni.sh
echo "built: $(ls target/release/ | grep -E "^(cilium|cilium-agent|cilium-cni|cilium-lab|cilium-mount|cilium-sysctlfix)$" | tr '\n' ' ')"

# The Kubernetes control plane the lab and the tests run, built from the
# release tools/k8s pins (no release binaries can be downloaded); cached,
# so this is quick after the first time.
if command -v go >/dev/null; then
    k8s_bin=$(./scripts/build-k8s.sh)
    echo "built: Kubernetes $(basename "$(dirname "$k8s_bin")") in $k8s_bin"
    # Then what a real node runs (kubelet, containerd and its shim, ctr,
    # crictl), the e2e images' agnhost and pause and the cluster DNS's
    # CoreDNS, from the pins in tools/; cached the same way.
    node_bin=$(./scripts/build-node.sh)
    echo "built: node binaries $(basename "$(dirname "$node_bin")") in $node_bin"
fi

# The images the lab's nodes run (and a user imports into their own
# containerd), as OCI archives in ~/.cache/cilium-rs/images/; rewritten
# only when what goes into them changed.
if [ -n "${node_bin:-}" ]; then
    ./target/release/cilium-lab images | sed 's/^/built: image /'
fi
