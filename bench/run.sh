#!/usr/bin/env bash
# Runs the benchmarks (as root, after ./scripts/install.sh). Each prints its
# result next to a baseline measured in the same run, and the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
# the cilium-cni that ships, up to date (quick when it is)
./scripts/build-cni.sh
exec ./target/release/cilium-bench "$@"
