#!/bin/sh
# The clean-cilium-state init container: wipes BPF state, or everything,
# when cilium-config asks for it (clean-cilium-bpf-state,
# clean-cilium-state); the CLEAN_CILIUM_* names are the older spelling.
# CLEANUP_ARGS carries path flags (the lab points them at its node).

if [ "${CILIUM_BPF_STATE}" = "true" ] || [ "${CLEAN_CILIUM_BPF_STATE}" = "true" ]; then
	cilium cleanup -f --bpf-state ${CLEANUP_ARGS}
fi

if [ "${CILIUM_ALL_STATE}" = "true" ] || [ "${CLEAN_CILIUM_STATE}" = "true" ]; then
	cilium cleanup -f --all-state ${CLEANUP_ARGS}
fi
