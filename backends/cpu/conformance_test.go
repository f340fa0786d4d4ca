package cpu_test

import (
	"testing"

	"github.com/ds4go/ds4/backends/backendtest"
	_ "github.com/ds4go/ds4/backends/cpu"
)

// TestConformance runs the conformance suite on the fast kernels ("cpu"),
// against the reference kernels ("cpu-ref"), for the ops "cpu" claims.
func TestConformance(t *testing.T) { backendtest.Run(t, "cpu") }
