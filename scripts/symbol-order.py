#!/usr/bin/env python3
"""Turns profiled agent runs into the linker's symbol order (see
scripts/symbol-order.sh, which runs this).

Usage: symbol-order.py BINARY COVERED... > symbol-order.txt

BINARY is the shipped (uninstrumented) build; each COVERED lists the
functions a group of profiled runs executed, one name a line, and each
group's functions not placed yet come after the group before. The
script's groups: what Kubernetes-mode agents ran once their start was
over, what only their start ran, what the other agents ran. An idle
Kubernetes-mode agent, the one the RSS goals are about, so keeps little
but the code it still runs resident.

Two gaps of the profile are closed from the binary itself:
- ThinLTO gives functions it made visible across codegen units a
  ".llvm.<n>" suffix the profile does not have.
- The standard library comes precompiled, without counters, so nothing
  in it is ever "covered". Every function outside our build's legacy
  mangling (`_ZN`; std's symbols are v0-mangled, ring's assembly is not
  Rust) that executed code calls or jumps to directly is added, and so
  on through what those call in turn.
"""

import re
import subprocess
import sys


def functions(binary):
    """The binary's function symbols."""
    out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    return [p[2] for p in (line.split() for line in out.splitlines()) if len(p) == 3 and p[1] in "tTwW"]


def direct_calls(binary):
    """Each function's direct call and jump targets, from its disassembly."""
    dump = subprocess.Popen(["objdump", "-d", "--no-show-raw-insn", binary], stdout=subprocess.PIPE, text=True)
    header = re.compile(r"^[0-9a-f]+ <(.+)>:$")
    branch = re.compile(r"\s(?:call|jmp)\s+[0-9a-f]+ <([^+>]+)>$")
    calls, current = {}, None
    for line in dump.stdout:
        line = line.rstrip("\n")
        m = header.match(line)
        if m:
            current = calls.setdefault(m.group(1), set())
            continue
        m = branch.search(line)
        if m and current is not None:
            current.add(m.group(1))
    dump.wait()
    return calls


def uninstrumented(name):
    return not name.startswith("_ZN")


def main():
    binary, group_paths = sys.argv[1], sys.argv[2:]
    names = functions(binary)
    by_profile_name = {}
    for name in names:
        by_profile_name.setdefault(re.sub(r"\.llvm\.\d+$", "", name), []).append(name)
    defined = set(names)
    calls = direct_calls(binary)

    placed = set()
    for path in group_paths:
        with open(path) as f:
            covered = [n for line in f for n in by_profile_name.get(line.strip(), [])]
        group, todo = [], list(covered)
        while todo:
            name = todo.pop()
            if name in placed:
                continue
            placed.add(name)
            group.append(name)
            todo.extend(t for t in calls.get(name, ()) if uninstrumented(t) and t in defined and t not in placed)
        # Sorted within the group, so that a new profile changes few lines.
        sys.stdout.writelines(name + "\n" for name in sorted(group))


if __name__ == "__main__":
    main()
