#!/usr/bin/env bash
# Writes crates/agent/symbol-order.txt: the cilium-agent functions that a
# profiled run of the `kubernetes` bench section executed. build/link.rs
# hands the list to the linker, which places those functions first, so the
# pages an idle agent keeps resident hold code it runs (see
# docs/benchmarks.md, session 37). A maintainer's tool, not part of the
# install or the tests: run it (as root, after ./scripts/install.sh) after
# changing the agent, its dependencies or the Rust version, then rebuild
# (ThinLTO's ".llvm.<n>" suffixes follow each codegen unit's contents).
#
# The profile comes from an instrumented build of the same packages with
# the same cargo command, made through a RUSTC_WRAPPER so that cargo's
# metadata, and so every symbol's hash, match the shipped build's.
#
# A Kubernetes-mode agent's profile comes in two parts, each written by
# the profile runtime's own functions, which gdb calls in it: what it ran
# until it said it gave back its start's pages (then its counters start
# again from zero), and what it ran after that (the rounds, the load, the
# idle agent) until the bench was over, not its shutdown. The latter's
# functions come first, then those only the start ran: interleaved, every
# start-only function sharing a fault-around window with one the agent
# runs later stayed resident. (Run idle for 2 s, an agent ran 180
# functions, its start 4242.)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v gdb > /dev/null || { echo "$0 needs gdb (apt-get install gdb)" >&2; exit 1; }

sysroot=$(rustc --print sysroot)
profdata="$sysroot/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
    rustup component add llvm-tools
fi

work=$(mktemp -d /var/tmp/symbol-order.XXXXXX)
# The instrumented build takes as long as the first build; SYMBOL_ORDER_TARGET
# names a target directory to keep it in between runs.
target=${SYMBOL_ORDER_TARGET:-$work/target}
pids="$work/agent-pids"
stop_agents() {
    # Agents whose wrapper the bench killed are still running: end them
    # (they write their profile as they exit), the Kubernetes-mode ones'
    # profile written first.
    if [ -f "$pids" ]; then
        while read -r pid kind; do
            if [ "$kind" = kubernetes ] && kill -0 "$pid" 2>/dev/null; then
                # (the runtime appends to a file that is there)
                gdb -p "$pid" -batch -ex 'call (int)__llvm_profile_write_file()' > /dev/null 2>&1 &&
                    mv "$work/profiles/kubernetes-$pid.profraw" "$work/steady/" || true
            fi
            kill -TERM "$pid" 2>/dev/null || true
        done < "$pids"
    fi
}
list=crates/agent/symbol-order.txt
trap 'stop_agents; rm -rf "$work" "$list.new"' EXIT

cat > "$work/rustc-wrapper" <<EOF
#!/bin/sh
rustc=\$1; shift
case " \$* " in
  *" --crate-name "*) exec "\$rustc" "\$@" -Cprofile-generate ;;
  *) exec "\$rustc" "\$@" ;;
esac
EOF
chmod +x "$work/rustc-wrapper"

echo "building an instrumented copy of the workspace in $target"
# (the build scripts and proc macros it runs are instrumented too: their
# profiles go with the other non-agent ones, not into the source tree)
CARGO_TARGET_DIR="$target" RUSTC_WRAPPER="$work/rustc-wrapper" LLVM_PROFILE_FILE="$work/other/%p.profraw" \
    cargo build --release --workspace --locked
cargo build --release --workspace --locked

# The bench runs the binaries beside its own; the agent there is a wrapper
# that records the real agent's pid, because the bench ends agents with
# SIGKILL and a killed process writes no profile.
bin="$work/bin"
mkdir -p "$bin" "$work/profiles" "$work/started" "$work/steady"
find "$target/release" -maxdepth 1 -type f -executable -exec cp {} "$bin/" \;
mv "$bin/cilium-agent" "$bin/cilium-agent.instrumented"
cat > "$bin/cilium-agent" <<EOF
#!/bin/bash
case " \$* " in
  *--k8s-kubeconfig-path*) kind=kubernetes ;;
  *) kind=other ;;
esac
LLVM_PROFILE_FILE=$work/profiles/\$kind-%p.profraw $bin/cilium-agent.instrumented "\$@" &
agent=\$!
echo \$agent \$kind >> $pids
if [ \$kind = kubernetes ]; then
    # a quiet node's agent logs to agent.log beside its bpffs
    for arg in "\$@"; do
        case \$arg in --bpf-root=*) log=\$(dirname "\${arg#--bpf-root=}")/agent.log ;; esac
    done
    while kill -0 \$agent 2>/dev/null; do
        if grep -q "Released the pages only the start used" "\$log" 2>/dev/null; then
            gdb -p \$agent -batch -ex 'call (int)__llvm_profile_write_file()' \\
                -ex 'call (void)__llvm_profile_reset_counters()' > /dev/null 2>&1
            mv $work/profiles/kubernetes-\$agent.profraw $work/started/
            break
        fi
        sleep 0.05
    done
fi
wait \$agent
EOF
chmod +x "$bin/cilium-agent"

echo "running the kubernetes bench section on the instrumented agent"
touch "$work/bench-started"
LLVM_PROFILE_FILE="$work/other/%p.profraw" "$bin/cilium-bench" kubernetes 2 1000
# a child the bench starts with a cleared environment (cilium-cni, as a
# runtime calls it) writes its profile to the current dir; the work dir's
# trap removes it from there
find . -maxdepth 1 -name 'default_*.profraw' -newer "$work/bench-started" -exec mv {} "$work/" \;
stop_agents
for _ in $(seq 50); do
    alive=0
    while read -r pid _; do kill -0 "$pid" 2>/dev/null && alive=1; done < "$pids"
    [ $alive = 0 ] && break
    sleep 0.2
done

ls "$work/steady/"*.profraw > /dev/null # a Kubernetes agent must have run
for set in steady/kubernetes started/kubernetes profiles/other; do
    name=${set//\//-}
    "$profdata" merge -o "$work/$name.profdata" "$work/$set"-*.profraw
    # Local functions are named "<file>;<symbol>" in a profile.
    "$profdata" show --covered "$work/$name.profdata" | sed 's/^.*;//' | sort -u > "$work/$name.covered"
done
# written whole or not at all: a failed run leaves the old list in place
python3 scripts/symbol-order.py target/release/cilium-agent "$work/steady-kubernetes.covered" \
    "$work/started-kubernetes.covered" "$work/profiles-other.covered" > "$list.new"
mv "$list.new" "$list"
echo "$list: $(wc -l < "$list") functions"
