#!/usr/bin/env bash
# Builds what a real Kubernetes node runs, beyond what Debian gives (runc,
# the CNI plugins: scripts/install.sh installs those): kubelet (from
# scripts/build-k8s.sh) and kube-proxy (the baseline nodes of the
# benchmarks), containerd, containerd-shim-runc-v2, ctr, crictl,
# the two binaries of the e2e tests' images, agnhost and pause, and the
# cluster DNS server, CoreDNS. Each from a Go module at a pinned release
# (tools/k8s, tools/containerd, tools/crictl, tools/coredns; pause.c from
# the k8s.io/kubernetes module), since no
# release binaries can be downloaded here, version-stamped as upstream's
# own builds are. Into one cache dir that later runs reuse, named after
# the versions so a bump builds anew:
# ~/.cache/cilium-rs/node/k8s-<v>_containerd-<v>_crictl-<v>/bin (or under
# $CILIUM_RS_NODE_CACHE), CoreDNS beside it in coredns-<v>/bin. Prints the
# first bin directory.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

pin() { # module go.mod: the version go.mod requires
    local v
    v=$(awk -v m="$1" '$1 == m { print $2; exit }' "$2")
    [ -n "$v" ] || { echo "error: no $1 version in $2" >&2; exit 1; }
    echo "$v"
}
k8s_version=$(pin k8s.io/kubernetes tools/k8s/go.mod)
containerd_version=$(pin github.com/containerd/containerd/v2 tools/containerd/go.mod)
crictl_version=$(pin sigs.k8s.io/cri-tools tools/crictl/go.mod)
coredns_version=$(pin github.com/coredns/coredns tools/coredns/go.mod)
cache=${CILIUM_RS_NODE_CACHE:-${HOME}/.cache/cilium-rs/node}
bin="${cache}/k8s-${k8s_version}_containerd-${containerd_version}_crictl-${crictl_version}/bin"
# localhost.crt and .key: agnhost's porter serves TLS with them (upstream's
# image has them at /), from the module's test/images/agnhost/porter.
tools=(kubelet kube-proxy agnhost pause containerd containerd-shim-runc-v2 ctr crictl localhost.crt localhost.key)

missing=()
for t in "${tools[@]}"; do
    [ -e "${bin}/${t}" ] || missing+=("$t")
done
if [ "${#missing[@]}" -gt 0 ]; then
    command -v go >/dev/null || { echo "error: Go is needed to build the node binaries (README: prerequisites)" >&2; exit 1; }
    rm -rf "${bin}.tmp"
    mkdir -p "${bin}.tmp"
    for t in "${missing[@]}"; do
        echo "building ${t} (first time: a few minutes)" >&2
        case $t in
        kubelet | kube-proxy)
            # Built with the control plane (same stamping, same cache);
            # linked, not copied, when both caches share a filesystem.
            k8s_bin=$("$root/scripts/build-k8s.sh")
            ln -f "${k8s_bin}/${t}" "${bin}.tmp/${t}" 2>/dev/null || cp "${k8s_bin}/${t}" "${bin}.tmp/${t}"
            ;;
        agnhost)
            # The image's version is test/images/agnhost/VERSION of the
            # pinned release (2.56 in v1.34.4); its Makefile stamps it so.
            (
                cd "$root/tools/k8s"
                go mod download k8s.io/kubernetes
                src=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)
                CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.Version=$(cat "${src}/test/images/agnhost/VERSION")" \
                    -o "${bin}.tmp/agnhost" k8s.io/kubernetes/test/images/agnhost
            )
            ;;
        localhost.crt | localhost.key)
            (
                cd "$root/tools/k8s"
                go mod download k8s.io/kubernetes
                src=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)
                install -m 0644 "${src}/test/images/agnhost/porter/${t}" "${bin}.tmp/${t}"
            )
            ;;
        pause)
            # registry.k8s.io/pause's binary: a static C program; its
            # Makefile's TAG is the image's version (3.10.1 in v1.34.4),
            # stamped as `pause -v` prints it ("pause.c v3.10.1"; upstream
            # appends a git describe suffix, which a module has no git for).
            (
                cd "$root/tools/k8s"
                go mod download k8s.io/kubernetes
                src=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause
                tag=$(awk '$1 == "TAG" && $2 == "?=" { print $3; exit }' "${src}/Makefile")
                [ -n "$tag" ] || { echo "error: no TAG in ${src}/Makefile" >&2; exit 1; }
                gcc -Os -Wall -Werror -static -s -DVERSION="v${tag}" -o "${bin}.tmp/pause" "${src}/linux/pause.c"
            )
            ;;
        containerd | containerd-shim-runc-v2 | ctr)
            # As containerd's Makefile builds them, minus cgo: the tags
            # leave out the snapshotters that need it (btrfs, devmapper,
            # zfs) and the man pages; the shim also leaves out grpc. The
            # version is what `containerd --version` and the CRI's
            # RuntimeVersion (kubelet's containerRuntimeVersion) report;
            # the module proxy has no git revision to stamp.
            tags="urfave_cli_no_docs no_btrfs no_devmapper no_zfs"
            [ "$t" = containerd-shim-runc-v2 ] && tags+=" no_grpc"
            pkg=github.com/containerd/containerd/v2
            (
                cd "$root/tools/containerd"
                CGO_ENABLED=0 go build -trimpath -tags "$tags" \
                    -ldflags "-s -w -X ${pkg}/version.Version=${containerd_version} -X ${pkg}/version.Package=${pkg}" \
                    -o "${bin}.tmp/${t}" "${pkg}/cmd/${t}"
            )
            ;;
        crictl)
            # As cri-tools' release script stamps it (the tag, with its v).
            (
                cd "$root/tools/crictl"
                CGO_ENABLED=0 go build -trimpath \
                    -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=${crictl_version}" \
                    -o "${bin}.tmp/crictl" sigs.k8s.io/cri-tools/cmd/crictl
            )
            ;;
        esac
    done
    mkdir -p "$bin"
    mv "${bin}.tmp"/* "$bin"/
    rmdir "${bin}.tmp"
fi

# CoreDNS as its Makefile builds it (CGO off, its plugin list compiled in
# at the tag), the image's /coredns.
dns_bin="${cache}/coredns-${coredns_version}/bin"
if [ ! -x "${dns_bin}/coredns" ]; then
    command -v go >/dev/null || { echo "error: Go is needed to build CoreDNS (README: prerequisites)" >&2; exit 1; }
    echo "building coredns (first time: a few minutes)" >&2
    mkdir -p "$dns_bin"
    (
        cd "$root/tools/coredns"
        CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${dns_bin}/coredns.tmp" github.com/coredns/coredns
    )
    mv "${dns_bin}/coredns.tmp" "${dns_bin}/coredns"
fi
echo "$bin"
