//go:build tools

// The suite is a test package; this keeps its module required.
package tools

import _ "k8s.io/kubernetes/test/e2e"
