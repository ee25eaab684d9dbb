#!/usr/bin/env bash
# Builds Cilium's own command-line clients at the release we mirror
# (cilium-dbg, cilium-health and the Hubble CLI, `hubble`, whose source at
# this release is the hubble/ folder of github.com/cilium/cilium, pinned in
# tools/cilium/go.mod), into a cache later runs reuse:
# ~/.cache/cilium-rs/cilium/<version>/bin (or $CILIUM_RS_CILIUM_CACHE).
# The tests run them against our agent, as a Cilium user would; they are
# test tools, not part of the install. Prints the bin directory.
set -euo pipefail
cd "$(dirname "$0")/../tools/cilium"

version=$(awk '$1 == "require" && $2 == "github.com/cilium/cilium" { print $3; exit } $1 == "github.com/cilium/cilium" { print $2; exit }' go.mod)
[ -n "$version" ] || { echo "error: no github.com/cilium/cilium version in tools/cilium/go.mod" >&2; exit 1; }
cache=${CILIUM_RS_CILIUM_CACHE:-${HOME}/.cache/cilium-rs/cilium}
bin="${cache}/${version}/bin"
tools=(cilium-dbg cilium-health hubble)

# One build at a time: scripts/test.sh starts one in the background and
# the test that runs the clients asks again; the second waits for the first.
mkdir -p "$cache"
exec 9>"${cache}/.build.lock"
flock 9

missing=()
for t in "${tools[@]}"; do
    [ -x "${bin}/${t}" ] || missing+=("$t")
done
if [ "${#missing[@]}" -gt 0 ]; then
    command -v go >/dev/null || { echo "error: Go is needed to build Cilium ${version}'s clients (README: prerequisites)" >&2; exit 1; }
    pkgs=()
    for t in "${missing[@]}"; do
        pkgs+=("github.com/cilium/cilium/${t}")
    done
    # what Cilium's Makefile stamps (version, revision, author date), so
    # `cilium-dbg version` names the release
    stamp="-X 'github.com/cilium/cilium/pkg/version.ciliumVersion=${version#v} ${version} 1970-01-01T00:00:00+00:00'"
    # and what hubble/Makefile stamps, so `hubble version` names it too
    stamp+=" -X 'github.com/cilium/cilium/hubble/pkg.Version=${version#v}'"
    echo "building ${missing[*]} ${version} (first time: several minutes)" >&2
    mkdir -p "${bin}.tmp"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w ${stamp}" -o "${bin}.tmp/" "${pkgs[@]}"
    mkdir -p "$bin"
    mv "${bin}.tmp"/* "$bin"/
    rmdir "${bin}.tmp"
fi
echo "$bin"
