#!/usr/bin/env bash
# Runs the benchmarks (as root, after ./scripts/install.sh). Each prints its
# result next to a baseline measured in the same run, and the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./target/release/cilium-bench "$@"
