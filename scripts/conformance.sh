#!/usr/bin/env bash
# Runs Kubernetes' own end-to-end tests (e2e.test, scripts/build-e2e.sh)
# against the lab: a running one, or one it brings up (and down after)
# with the `cilium-lab up` arguments given after `--`.
#
#   scripts/conformance.sh [FOCUS] [-- <cilium-lab up arguments>]
#
# FOCUS is a ginkgo regular expression, by default every sig-network
# conformance test. Prints `N passed, M failed, K skipped` and leaves the
# JUnit report (junit_01.xml) and a line per test (summary.txt) in
# $CONFORMANCE_RESULTS (default results/conformance/<UTC time>).
set -euo pipefail
cd "$(dirname "$0")/.."

focus='\[sig-network\].*\[Conformance\]'
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    focus=$1
    shift
fi
[ "${1:-}" = "--" ] && shift
up_args=("$@")

lab=./target/release/cilium-lab
[ -x "$lab" ] || { echo "error: $lab is missing: run scripts/install.sh (or cargo build --release)" >&2; exit 1; }
e2e=$(./scripts/build-e2e.sh)
results=${CONFORMANCE_RESULTS:-results/conformance/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$results"
results=$(cd "$results" && pwd)

started=0
if ! "$lab" kubectl get nodes >/dev/null 2>&1; then
    echo "==> bringing up a lab: cilium-lab up ${up_args[*]}"
    "$lab" up "${up_args[@]}"
    started=1
fi
cleanup() {
    if [ "$started" -eq 1 ]; then
        echo "==> taking the lab down"
        "$lab" down >/dev/null || true
    fi
}
trap cleanup EXIT

echo "==> e2e.test --ginkgo.focus='${focus}' (results in ${results})"
status=0
"$lab" admin -- "$e2e" \
    --provider=skeleton \
    --ginkgo.focus="$focus" \
    --ginkgo.no-color \
    --ginkgo.junit-report="${results}/junit_01.xml" \
    --ginkgo.timeout="${CONFORMANCE_TIMEOUT:-4h}" \
    --report-dir="$results" \
    --allowed-not-ready-nodes=0 \
    2>&1 | tee "${results}/e2e.log" || status=$?

python3 - "${results}/junit_01.xml" "${results}/summary.txt" <<'PY'
import sys
import xml.etree.ElementTree as ET

counts = {"passed": 0, "failed": 0, "skipped": 0}
lines = []
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError) as e:
    print(f"no JUnit report: {e}")
    sys.exit(1)
for case in root.iter("testcase"):
    name = case.get("name", "")
    if case.find("skipped") is not None:
        state = "skipped"
    elif case.find("failure") is not None or case.find("error") is not None:
        state = "failed"
    else:
        state = "passed"
    # ginkgo's setup and teardown nodes are reported as cases too
    if not name.startswith("[It]"):
        continue
    counts[state] += 1
    if state != "skipped":
        lines.append(f"{state.upper():7} {name}")
with open(sys.argv[2], "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
PY
exit "$status"
