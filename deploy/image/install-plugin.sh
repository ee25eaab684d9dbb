#!/bin/bash
# The install-cni-binaries init container: puts cilium-cni into the host's
# CNI bin dir. Copy under a hidden name, then rename, so kubelet never runs
# a half-written plugin.
set -e

HOST_PREFIX=${HOST_PREFIX:-/host}
BIN_NAME=cilium-cni
CNI_DIR=${CNI_DIR:-${HOST_PREFIX}/opt/cni}
# Where the image keeps its binaries
SOURCE_DIR=${SOURCE_DIR:-/opt/cni/bin}

mkdir -p "${CNI_DIR}/bin"

if [ ! -f "${CNI_DIR}/bin/loopback" ] && [ -f /cni/loopback ]; then
	echo "Installing loopback driver..."
	cp /cni/loopback "${CNI_DIR}/bin/" || true
fi

echo "Installing ${BIN_NAME} to ${CNI_DIR}/bin/ ..."
rm -f "${CNI_DIR}/bin/.${BIN_NAME}.new"
cp "${SOURCE_DIR}/${BIN_NAME}" "${CNI_DIR}/bin/.${BIN_NAME}.new"
mv "${CNI_DIR}/bin/.${BIN_NAME}.new" "${CNI_DIR}/bin/${BIN_NAME}"
echo "wrote ${CNI_DIR}/bin/${BIN_NAME}"
