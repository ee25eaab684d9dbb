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
# CONFORMANCE_NODES=N runs the specs in N ginkgo processes ([Serial] ones
# still one at a time, after the others), as hack/ginkgo-e2e.sh does.
# The tests' own images (httpd, nginx, sample-apiserver, ...: `cilium-lab
# images --e2e`) are built and imported into the nodes first, unless
# CONFORMANCE_TEST_IMAGES=0 (the lab's own images serve the tests chosen).
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
with_images=${CONFORMANCE_TEST_IMAGES:-1}
e2e=$(./scripts/build-e2e.sh $([ "$with_images" != 0 ] && echo --test-images))
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

if [ "$with_images" != 0 ]; then
    echo "==> the tests' images into the nodes"
    "$lab" images --e2e "$(dirname "$e2e")/test-images" --import >/dev/null
fi

echo "==> e2e.test --ginkgo.focus='${focus}' (results in ${results})"
status=0
nodes=${CONFORMANCE_NODES:-1}
# --report-dir: the suite writes junit_01.xml there itself, merged over
# the parallel processes
suite_args=(
    --provider=skeleton
    --report-dir="$results"
    --allowed-not-ready-nodes=0
)
ginkgo_args=(
    --focus="$focus"
    --no-color
    --timeout="${CONFORMANCE_TIMEOUT:-4h}"
)
if [ "$nodes" -gt 1 ]; then
    run=("$(dirname "$e2e")/ginkgo" --nodes="$nodes" "${ginkgo_args[@]}" "$e2e" -- "${suite_args[@]}")
else
    run=("$e2e" "${ginkgo_args[@]/#--/--ginkgo.}" "${suite_args[@]}")
fi
"$lab" admin -- "${run[@]}" \
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
