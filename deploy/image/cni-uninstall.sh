#!/bin/bash
# The agent's preStop hook: with cni-uninstall on, takes Cilium's CNI
# configuration away so kubelet sends no pods while the agent is down.
set -e

CONFIG_DIR=${CONFIG_DIR:-/tmp/cilium/config-map}
CNI_CONF_DIR=${CNI_CONF_DIR:-/host/etc/cni/net.d}

if [ "$(cat "${CONFIG_DIR}/cni-uninstall" 2>/dev/null)" != "true" ]; then
	echo "cni-uninstall disabled, not removing CNI configuration"
	exit 0
fi
if [ "${CILIUM_CUSTOM_CNI_CONF}" = "true" ]; then
	exit 0
fi
find "${CNI_CONF_DIR}" -maxdepth 1 -type f \
	\( -name '*cilium*.conf' -o -name '*cilium*.conflist' \) -print -delete
