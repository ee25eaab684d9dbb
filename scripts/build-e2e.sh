#!/usr/bin/env bash
# Builds Kubernetes' end-to-end suite (e2e.test, from k8s.io/kubernetes's
# test/e2e at the release tools/e2e/go.mod pins, which must be the one
# tools/k8s/go.mod pins) into a cache later runs reuse:
# ~/.cache/cilium-rs/e2e/<version>/e2e.test (or $CILIUM_RS_E2E_CACHE).
# Version-stamped as hack/lib/version.sh stamps it. Beside it, ginkgo's
# CLI at the version the suite links (parallel runs need it, as
# hack/ginkgo-e2e.sh uses it). With --test-images, also the inputs of the
# tests' images that are not the lab's (`cilium-lab images --e2e <dir>`
# builds them): test-images/ holds nonewprivs' nnp, sample-apiserver
# (tools/sample-apiserver), the update demo's pages (nautilus/, kitten/)
# and busybox 1.37.0 built as Docker's busybox image builds it (upstream's
# source, from Debian's archive, defconfig, static). Prints e2e.test's
# path.
set -euo pipefail
. "$(dirname "$0")/k8s-version-stamp.sh"
cd "$(dirname "$0")/../tools/e2e"
test_images=0
BUSYBOX_VERSION=1.37.0
BUSYBOX_SOURCE=http://deb.debian.org/debian/pool/main/b/busybox/busybox_${BUSYBOX_VERSION}.orig.tar.bz2
BUSYBOX_SHA256=3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4
[ "${1:-}" = "--test-images" ] && test_images=1

version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' go.mod)
control_plane=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' ../k8s/go.mod)
[ -n "$version" ] || { echo "error: no k8s.io/kubernetes version in tools/e2e/go.mod" >&2; exit 1; }
if [ "$version" != "$control_plane" ]; then
    echo "error: tools/e2e pins k8s.io/kubernetes ${version}, tools/k8s ${control_plane}: the suite must test the cluster's release" >&2
    exit 1
fi
cache=${CILIUM_RS_E2E_CACHE:-${HOME}/.cache/cilium-rs/e2e}
out="${cache}/${version}/e2e.test"
# One build at a time: scripts/test.sh starts one in the background and
# the conformance run after the tests asks again; the second waits.
mkdir -p "$cache"
exec 9>"${cache}/.build.lock"
flock 9
if [ ! -x "$out" ]; then
    command -v go >/dev/null || { echo "error: Go is needed to build e2e.test ${version} (README: prerequisites)" >&2; exit 1; }
    stamp=$(k8s_version_stamp "$version")
    mkdir -p "$(dirname "$out")"
    echo "building e2e.test ${version} (first time: several minutes)" >&2
    CGO_ENABLED=0 go test -c -trimpath -ldflags "-s -w${stamp}" -o "${out}.tmp" k8s.io/kubernetes/test/e2e
    mv "${out}.tmp" "$out"
fi
ginkgo="$(dirname "$out")/ginkgo"
if [ ! -x "$ginkgo" ]; then
    CGO_ENABLED=0 go build -trimpath -o "${ginkgo}.tmp" github.com/onsi/ginkgo/v2/ginkgo
    mv "${ginkgo}.tmp" "$ginkgo"
fi
inputs="$(dirname "$out")/test-images"
if [ "$test_images" = 1 ] && [ ! -x "${inputs}/busybox" ]; then
    echo "building the test images' programs (nnp, sample-apiserver)" >&2
    rm -rf "${inputs}.tmp"
    mkdir -p "${inputs}.tmp"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${inputs}.tmp/nnp" k8s.io/kubernetes/test/images/nonewprivs
    module=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)
    for demo in nautilus kitten; do
        mkdir "${inputs}.tmp/${demo}"
        cp "${module}/test/images/${demo}/html/"* "${inputs}.tmp/${demo}/"
        chmod 0644 "${inputs}.tmp/${demo}/"*
    done
    (cd ../sample-apiserver && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${inputs}.tmp/sample-apiserver" k8s.io/sample-apiserver)
    # Debian's own busybox builds drop environment variables whose names
    # are no shell identifier, which 1.37's ash passes on and the
    # ConfigMap and Secret env tests check; upstream's source keeps them.
    # TC is left out: it needs kernel headers older than some hosts have.
    (
        cd "${inputs}.tmp"
        curl -fsS -o busybox.tar.bz2 "$BUSYBOX_SOURCE"
        echo "${BUSYBOX_SHA256}  busybox.tar.bz2" | sha256sum -c --quiet
        tar xjf busybox.tar.bz2
        cd "busybox-${BUSYBOX_VERSION}"
        make defconfig >/dev/null
        sed -i 's/^# CONFIG_STATIC is not set/CONFIG_STATIC=y/; s/^CONFIG_TC=y/# CONFIG_TC is not set/' .config
        make -j"$(nproc)" busybox >build.log 2>&1 || { tail -20 build.log >&2; exit 1; }
        cp busybox ../busybox
        cd ..
        rm -rf "busybox-${BUSYBOX_VERSION}" busybox.tar.bz2
    )
    rm -rf "$inputs"
    mv "${inputs}.tmp" "$inputs"
fi
echo "$out"
