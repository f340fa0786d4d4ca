package cuda

import (
	"testing"

	"github.com/ds4go/ds4/backends/backendtest"
	_ "github.com/ds4go/ds4/backends/cpu" // the reference the suite compares with
)

// TestConformance runs the conformance suite on the GPU (it skips, saying
// why, where no GPU is usable).
func TestConformance(t *testing.T) { backendtest.Run(t, "cuda") }
