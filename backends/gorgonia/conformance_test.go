package gorgonia_test

import (
	"testing"

	"github.com/ds4go/ds4/backends/backendtest"
	_ "github.com/ds4go/ds4/backends/cpu"
	_ "github.com/ds4go/ds4/backends/gorgonia"
)

// TestConformance runs the conformance suite on the gorgonia backend for
// the ops it claims (f32 elementwise ops and products); cases of other
// dtypes are reported as falling back.
func TestConformance(t *testing.T) { backendtest.Run(t, "gorgonia") }
