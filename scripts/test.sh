#!/usr/bin/env bash
# Runs every test (unit, BPF_PROG_TEST_RUN, agent end-to-end) as root and
# closes with one summary line. Kernel tests make their own namespaces.
set -uo pipefail
cd "$(dirname "$0")/.."

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# --all-targets builds the binaries the end-to-end tests drive and skips
# doc-tests (there are none worth running).
cargo test --release --workspace --locked --all-targets 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

passed=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s+=$4} END {print s+0}')
failed=$(grep -Eo '[0-9]+ failed' "$log" | awk '{s+=$1} END {print s+0}')
echo
echo "tests: ${passed} passed, ${failed} failed"
exit "$status"
