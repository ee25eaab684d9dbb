// Cilium v1.16.0's own clients, cilium-dbg, cilium-health and the Hubble
// CLI, which the tests run against our agent
// (scripts/build-cilium-tools.sh builds them).

//go:build tools

package tools

import (
	_ "github.com/cilium/cilium/cilium-dbg"
	_ "github.com/cilium/cilium/cilium-health"
	_ "github.com/cilium/cilium/hubble"
)
