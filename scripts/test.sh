#!/usr/bin/env bash
# Runs every test (unit, BPF_PROG_TEST_RUN, agent end-to-end) as root,
# then a subset of Kubernetes' own conformance tests on a lab of its own
# (CONFORMANCE_SUBSET below; scripts/conformance.sh runs any other), and
# closes with one summary line counting every test of every target, also
# when some fail. Kernel tests make their own namespaces.
set -uo pipefail
cd "$(dirname "$0")/.."

log=$(mktemp)
tools_log=$(mktemp)
e2e_log=$(mktemp)
trap 'rm -f "$log" "$tools_log" "$e2e_log"' EXIT

# The conformance tests CI runs (README: tests): pod-to-pod and node-to-pod
# over HTTP and UDP, a NodePort, cluster DNS, hostPort and a Service's TCP
# and UDP ports of one number.
CONFORMANCE_SUBSET='Networking Granular Checks: Pods.*\[Conformance\]|should be able to create a functioning NodePort service \[Conformance\]|DNS should provide DNS for services +\[Conformance\]|HostPort.*\[Conformance\]|should serve endpoints on same port and different protocols'

# Cilium 1.16's own clients, which a lab test runs against our agent, take
# minutes to build the first time: built at low priority beside the tests
# (most of which wait on sleeps and timers), and the test that needs them
# waits for this build (the script holds a lock) instead of starting one.
if command -v go >/dev/null; then
    nice -n 19 ./scripts/build-cilium-tools.sh >"$tools_log" 2>&1 &
    tools_pid=$!
    # Kubernetes' e2e.test likewise, for the conformance subset at the end
    nice -n 19 ./scripts/build-e2e.sh >"$e2e_log" 2>&1 &
    e2e_pid=$!
fi
# --all-targets builds the binaries the end-to-end tests drive and skips
# doc-tests (there are none worth running); --no-fail-fast runs every
# target after one fails, so the summary below is the whole suite's.
# The build comes first, then the musl cilium-cni the tests run (they take
# the binary made last: scripts/build-cni.sh), then the run.
cargo test --release --workspace --locked --all-targets --no-run 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -eq 0 ]; then
    ./scripts/build-cni.sh 2>&1 | tee -a "$log"
    status=${PIPESTATUS[0]}
fi
if [ "$status" -eq 0 ]; then
    cargo test --release --workspace --locked --all-targets --no-fail-fast 2>&1 | tee -a "$log"
    status=${PIPESTATUS[0]}
fi

# The control plane's tests must need no root (crates/controlplane builds
# without the kernel crates, its tests use fakes): run them again as an
# unprivileged user, so a test that starts to need root fails here.
# Its executables are those the run above built: asked of the same
# workspace build (`-p controlplane` alone unifies other features and
# would build its dependencies again).
if [ "$status" -eq 0 ]; then
    bins=$(cargo test --release --workspace --locked --all-targets --no-run --message-format=json 2>/dev/null |
        grep '/crates/controlplane#' | grep -o '"executable":"[^"]*"' | cut -d'"' -f4)
    for bin in $bins; do
        echo "     Running unprivileged ${bin}" | tee -a "$log"
        setpriv --reuid=65534 --regid=65534 --clear-groups "$bin" 2>&1 | tee -a "$log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    done
fi

# the clients' build ended long ago in a full run; a run cut short waits
# for it rather than leaving it behind
if [ -n "${tools_pid:-}" ]; then
    wait "$tools_pid" || sed 's/^/cilium clients build: /' "$tools_log"
fi

# Kubernetes' own conformance subset, on a lab of its own brought up and
# down by scripts/conformance.sh; its count joins the summary.
conformance_passed=0
conformance_failed=0
if [ -n "${e2e_pid:-}" ]; then
    if wait "$e2e_pid"; then
        # the lab's dir goes with `down`; the log and results stay beside it
        work=$(mktemp -d)
        echo "     Running Kubernetes conformance subset (in ${work})" | tee -a "$log"
        CILIUM_LAB_DIR=$work/lab CONFORMANCE_RESULTS=$work/results \
            CONFORMANCE_TEST_IMAGES=0 ./scripts/conformance.sh "$CONFORMANCE_SUBSET" >"$work/run.log" 2>&1
        conformance_status=$?
        grep -aE '^(• \[FAILED\]|  \[FAILED\]|==> |[0-9]+ passed, [0-9]+ failed)' "$work/run.log"
        counts=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed, .*/\1 \2/p' "$work/run.log" | tail -1)
        read -r conformance_passed conformance_failed <<<"${counts:-0 0}"
        if [ "$conformance_status" -ne 0 ] && [ "$conformance_failed" -eq 0 ] || [ -z "$counts" ]; then
            # the run broke before any test could fail (the lab did not
            # come up): one failure, with its log
            tail -40 "$work/run.log"
            conformance_failed=$((conformance_failed > 0 ? conformance_failed : 1))
        fi
        if [ "$conformance_failed" -eq 0 ]; then
            rm -rf "$work"
        else
            echo "conformance: log and results kept in ${work}"
        fi
    else
        sed 's/^/e2e.test build: /' "$e2e_log"
        conformance_failed=1
    fi
fi

# The benchmarks at their smallest (README: benchmarks): they measure
# nothing at that size, but a section that no longer runs fails the suite.
# One test in the summary.
bench_failed=0
if [ "$status" -eq 0 ]; then
    echo "     Bench smoke run (bench/run.sh --smoke)"
    bench_log=$(mktemp)
    if ./bench/run.sh --smoke >"$bench_log" 2>&1; then
        grep -E '^  \(section ' "$bench_log"
    else
        tail -40 "$bench_log"
        bench_failed=1
    fi
    rm -f "$bench_log"
fi

# Each target prints one "Running" line and, unless its binary died (a
# signal, an abort), one "test result:" line. A target that died counts as
# one failure, as its own tests were never reported.
read -r passed failed results < <(awk '
    /^test result: / {
        results++
        for (i = 1; i <= NF; i++) {
            if ($(i + 1) ~ /^passed;?$/) passed += $i
            if ($(i + 1) ~ /^failed;?$/) failed += $i
        }
    }
    END { print passed + 0, failed + 0, results + 0 }' "$log")
targets=$(grep -cE '^\s+Running (unittests )?\S' "$log")
# the conformance subset's "Running" line has no "test result:" line
[ -n "${e2e_pid:-}" ] && grep -q 'Running Kubernetes conformance subset' "$log" && targets=$((targets - 1))
died=$((targets > results ? targets - results : 0))
failed=$((failed + died))
passed=$((passed + conformance_passed))
failed=$((failed + conformance_failed))
if [ "$status" -eq 0 ]; then
    passed=$((passed + 1 - bench_failed))
    failed=$((failed + bench_failed))
fi
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    # cargo failed before any test could (a build error): say so rather
    # than print a clean count
    echo
    echo "tests: ${passed} passed, build or run failed (cargo exit ${status})"
    exit "$status"
fi
suffix=""
[ "$died" -gt 0 ] && suffix=" (${died} target(s) died without a result)"
echo
echo "tests: ${passed} passed, ${failed} failed${suffix}"
if [ "$failed" -gt 0 ] && [ "$status" -eq 0 ]; then
    status=1
fi
exit "$status"
