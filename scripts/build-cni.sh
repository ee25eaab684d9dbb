#!/usr/bin/env bash
# Builds the cilium-cni that ships (in the agent's image, the lab's nodes and
# the benchmarks) for x86_64-unknown-linux-musl, beside the glibc one that
# `cargo build --workspace` makes in target/release.
#
# Why: the container runtime execs cilium-cni for every pod, and a glibc
# process, static or not, starts by reading the CPU's cache layout with
# about a hundred cpuid instructions. On a virtual machine each one traps
# to the hypervisor; on this machine kind one takes 9 us, so glibc's start
# alone cost 0.8 ms of a 3-4 ms ADD. musl's start executes none.
#
# The build's binary is touched afterwards: consumers take whichever of the
# two binaries was made (or found up to date) last (images::cilium_cni), so
# a later `cargo build` or `cargo test` that relinks the glibc one after a
# source change is never shadowed by a stale musl one.
#
# Without the musl target (rustup installs it when it can) the glibc binary
# is what ships; this says so and succeeds.
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-musl
sysroot=$(rustc --print sysroot)
if [ ! -d "$sysroot/lib/rustlib/$target" ] && command -v rustup >/dev/null; then
    rustup target add "$target" >/dev/null 2>&1 || true
fi
if [ ! -d "$sysroot/lib/rustlib/$target" ]; then
    echo "warning: the Rust standard library for $target is missing (rustup target add $target): cilium-cni ships linked against glibc" >&2
    exit 0
fi
cargo build --quiet --release --locked --target "$target" -p cni
touch "target/$target/release/cilium-cni"
