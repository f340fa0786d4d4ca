package example_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/backendtest"
	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/ir"
)

// The second step of docs/backends.md: a host backend with a kernel of
// its own. It runs mul_scalar itself (on HostDevice, which gives host
// backends buffers, binding, arenas and the segment loop) and falls back
// to cpu-ref for the rest; the conformance suite checks the kernel.

type kernelBackend struct{}

func init() { backends.Register(kernelBackend{}) }

func (kernelBackend) Name() string     { return "example-kernel" }
func (kernelBackend) Available() error { return nil }

func (kernelBackend) Capabilities() backends.Capabilities {
	return backends.Capabilities{
		Ops:      map[string][]ir.DType{"mul_scalar": {ir.F32, ir.BF16}},
		Fallback: "cpu-ref",
		Host:     true,
	}
}

func (kernelBackend) Open() (backends.Device, error) {
	return &backends.HostDevice{
		Backend: "example-kernel",
		Desc:    "host, one Go kernel",
		// Kernel is asked once per node when a segment is prepared.
		Kernel: func(n *ir.Node) (backends.HostKernel, error) {
			if n.Op != "mul_scalar" {
				return nil, fmt.Errorf("no kernel for %s", n.Op)
			}
			return mulScalar, nil
		},
		// Bind nil: weights get the default host layout
		// (backends.HostWeightTensor).
	}, nil
}

// mulScalar is x · value in fp32, rounded to x's dtype (the op's doc).
func mulScalar(_ *backends.Env, n *ir.Node, args []*backends.Tensor) (*backends.Tensor, error) {
	x := args[0]
	if len(x.F32) != x.NumElements() {
		return nil, fmt.Errorf("mul_scalar: operand has no f32 values")
	}
	v := float32(n.Attrs.Float("value", 0))
	out := &backends.Tensor{DType: x.DType, Shape: slices.Clone(x.Shape), F32: make([]float32, len(x.F32))}
	for i, e := range x.F32 {
		out.F32[i] = e * v
	}
	if x.DType == ir.BF16 {
		numfmt.BF16RoundSlice(out.F32)
	}
	return out, nil
}

func TestKernelBackendConformance(t *testing.T) { backendtest.Run(t, "example-kernel") }
