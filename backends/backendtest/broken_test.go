package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/ir"
)

// broken is a backend with the reference's kernels, except that a chosen
// op's result is damaged: it shows that the suite fails a wrong backend.
type broken struct {
	name, op string
	damage   func(t *backends.Tensor)
}

func (b broken) Name() string     { return b.name }
func (b broken) Available() error { return nil }
func (b broken) Capabilities() backends.Capabilities {
	// the state a state-updating op writes lives on its backend
	return backends.Capabilities{Ops: map[string][]ir.DType{b.op: nil, "state": nil}, Fallback: Reference, Host: true}
}

func (b broken) Open() (backends.Device, error) {
	ref, err := backends.Get(Reference)
	if err != nil {
		return nil, err
	}
	d, err := ref.Open()
	if err != nil {
		return nil, err
	}
	hd, ok := d.(*backends.HostDevice)
	if !ok {
		return nil, fmt.Errorf("%s is not a host device", Reference)
	}
	return &backends.HostDevice{Backend: b.name, Kernel: func(n *ir.Node) (backends.HostKernel, error) {
		k, err := hd.Kernel(n)
		if err != nil {
			return nil, err
		}
		return func(env *backends.Env, n *ir.Node, args []*backends.Tensor) (*backends.Tensor, error) {
			out, err := k(env, n, args)
			if err == nil {
				b.damage(out)
			}
			return out, err
		}, nil
	}}, nil
}

// nextUp moves element i by n float32 ulps.
func nextUp(i int, n uint32) func(*backends.Tensor) {
	return func(t *backends.Tensor) { t.F32[i] = math.Float32frombits(math.Float32bits(t.F32[i]) + n) }
}

// nudge moves element i away from zero by rel of itself plus abs.
func nudge(i int, rel, abs float32) func(*backends.Tensor) {
	return func(t *backends.Tensor) {
		v := t.F32[i]
		t.F32[i] = v + rel*v + float32(math.Copysign(float64(abs), float64(v)))
	}
}

func init() {
	backends.Register(broken{"broken-cast", "cast", nextUp(3, 1<<16)})                    // one bf16 ulp, one element
	backends.Register(broken{"broken-rmsnorm", "rmsnorm", nudge(100, 0.03, 0.01)})        // ≥ 3 bf16 ulp, one element
	backends.Register(broken{"broken-matmul", "matmul", nudge(5, 1e-3, 1e-3)})            // 1e-3 of an f32 product
	backends.Register(broken{"broken-window", "window_update", func(t *backends.Tensor) { // the last element written wrong
		t.F32[len(t.F32)-1] += 1
	}})
}

// TestSuiteFailsBrokenBackends checks that the comparison fails a backend
// whose one element is off by one bf16 ulp where the tolerance is
// bit-exact, by three where it is the golden rule, by 1e-3 of an f32
// product (far beyond fp32 reordering), and in the state a call leaves.
func TestSuiteFailsBrokenBackends(t *testing.T) {
	seed := Seed(t)
	for be, name := range map[string]string{
		"broken-cast":    "cast/f32_to_bf16",
		"broken-rmsnorm": "rmsnorm/dim",
		"broken-matmul":  "matmul/f32_hc_fn",
		"broken-window":  "window_update/decode_batch2",
	} {
		c := caseNamed(t, name)
		out, err := Check(be, c, Build(t, c, seed))
		if err != nil {
			t.Fatalf("%s: %v", be, err)
		}
		if out.Placed != be || len(out.Failed) == 0 {
			t.Errorf("%s on %s: placed on %s, %d failures; want it placed there and failed (%v)", be, name, out.Placed, len(out.Failed), out.Measured)
			continue
		}
		t.Logf("%s: %v", be, out.Failed[0])
	}
}

func caseNamed(t *testing.T, name string) Case {
	for _, c := range Cases() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no case %s", name)
	return Case{}
}
