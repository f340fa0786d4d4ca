package backends_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ds4go/ds4/backends"
	_ "github.com/ds4go/ds4/backends/cpu"
	"github.com/ds4go/ds4/ir"
)

// fakeBackend is a registered backend of the tests: its own capability
// table, the devices of cpu-ref (so its segments compute real values).
type fakeBackend struct {
	name string
	caps backends.Capabilities
}

func (b fakeBackend) Name() string                        { return b.name }
func (b fakeBackend) Available() error                    { return nil }
func (b fakeBackend) Capabilities() backends.Capabilities { return b.caps }
func (b fakeBackend) Open() (backends.Device, error) {
	ref, err := backends.Get("cpu-ref")
	if err != nil {
		return nil, err
	}
	return ref.Open()
}

func init() {
	backends.Register(fakeBackend{"test-gpu", backends.Capabilities{
		Ops:      map[string][]ir.DType{"input": nil, "weight": nil, "matmul": {ir.F32}, "add": {ir.F32}},
		Fallback: "cpu-ref"}})
	backends.Register(fakeBackend{"test-loop-a", backends.Capabilities{Ops: map[string][]ir.DType{}, Fallback: "test-loop-b"}})
	backends.Register(fakeBackend{"test-loop-b", backends.Capabilities{Ops: map[string][]ir.DType{}, Fallback: "test-loop-a"}})
	backends.Register(fakeBackend{"test-inputs-only", backends.Capabilities{Ops: map[string][]ir.DType{"input": nil}}})
}

// testGraph is out = silu(sigmoid(x·wᵀ)) + x·wᵀ over f32[B,4].
func testGraph() *ir.Graph {
	g := ir.NewGraph("decode")
	x := g.Source("input", ir.T(ir.F32, "B", 4), ir.Attrs{"name": "x"})
	w := g.Source("weight", ir.T(ir.F32, 4, 4), ir.Attrs{"name": "w", "format": "f32"})
	y := g.Add("matmul", nil, x, w)
	s := g.Add("silu", nil, g.Add("sigmoid", nil, y))
	g.SetOutput("out", g.Add("add", nil, s, y))
	return g
}

// TestScheduleSegments: nodes go to the first backend of the chain that
// takes them, sources to their reader's backend; the segments are the runs
// of one backend and the transfers the values read across them.
func TestScheduleSegments(t *testing.T) {
	g := testGraph()
	pl, err := backends.Schedule(g, "test-gpu")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, seg := range pl.Segments {
		var ops []string
		for _, n := range seg.Nodes {
			ops = append(ops, n.Op)
		}
		got = append(got, seg.Backend+":"+strings.Join(ops, ","))
	}
	want := []string{"test-gpu:input,weight,matmul", "cpu-ref:sigmoid,silu", "test-gpu:add"}
	if !slices.Equal(got, want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
	if !slices.Equal(pl.Chain, []string{"test-gpu", "cpu-ref"}) {
		t.Errorf("chain %v", pl.Chain)
	}
	// y crosses to cpu-ref, silu's value back; add reads y on its own device.
	var tr []string
	for _, x := range pl.Transfers {
		tr = append(tr, x.Node.Op+":"+x.From+"→"+x.To)
		if x.HandOver {
			t.Errorf("%s: a hand-over between a non-host backend and cpu-ref", x.Node.Op)
		}
	}
	if !slices.Equal(tr, []string{"matmul:test-gpu→cpu-ref", "silu:cpu-ref→test-gpu"}) {
		t.Errorf("transfers %v", tr)
	}
	if n := len(pl.Segments[2].In); n != 2 {
		t.Errorf("the last segment reads %d values from others, want 2 (y and silu)", n)
	}
	if b := pl.CrossingBytes(ir.Bindings{B: 3}); b != 2*3*4*4 {
		t.Errorf("crossing bytes %d at B=3, want %d", b, 2*3*4*4)
	}
	if fo := pl.FallbackOps(); fo != "cpu-ref: sigmoid×1, silu×1" {
		t.Errorf("FallbackOps %q", fo)
	}
	if r := pl.Report(ir.Bindings{B: 1}); !strings.Contains(r, "3 segments; 2 values cross between backends (2 copied, 0 handed over") {
		t.Errorf("report:\n%s", r)
	}
}

// TestScheduleRefuses: a fallback loop, and a node no backend of the
// chain runs, are errors naming them.
func TestScheduleRefuses(t *testing.T) {
	if _, err := backends.Schedule(testGraph(), "test-loop-a"); err == nil || !strings.Contains(err.Error(), "the fallbacks loop") {
		t.Errorf("loop: %v", err)
	}
	if _, err := backends.Schedule(testGraph(), "test-inputs-only"); err == nil || !strings.Contains(err.Error(), "(weight f32[4,4]): no backend of test-inputs-only runs it") {
		t.Errorf("no backend: %v", err)
	}
	if _, err := backends.Schedule(testGraph(), "nope"); err == nil || !strings.Contains(err.Error(), `backend "nope" is not available`) {
		t.Errorf("unknown: %v", err)
	}
}

// TestRunnerAcrossSegments runs the three segments on two devices and
// gets the values of the whole graph on cpu-ref, bit for bit.
func TestRunnerAcrossSegments(t *testing.T) {
	g := testGraph()
	w := &backends.Tensor{DType: ir.F32, Shape: []int{4, 4}}
	x := &backends.Tensor{DType: ir.F32, Shape: []int{2, 4}}
	for i := range 16 {
		w.F32 = append(w.F32, float32(math.Sin(float64(i))))
	}
	for i := range 8 {
		x.F32 = append(x.F32, float32(i)/3-1)
	}
	run := func(primary string) []float32 {
		pl, err := backends.Schedule(g, primary)
		if err != nil {
			t.Fatal(err)
		}
		devs := map[string]backends.Device{}
		for _, be := range pl.Chain {
			b, _ := backends.Get(be)
			if devs[be], err = b.Open(); err != nil {
				t.Fatal(err)
			}
		}
		r, err := backends.NewRunner(pl, devs)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Run(&backends.Call{B: 2, S: 1, M: 1,
			Inputs: map[string]*backends.Tensor{"x": x},
			Weight: func(string, *ir.Node) (backends.Buffer, error) { return w, nil }})
		if err != nil {
			t.Fatal(err)
		}
		v, err := backends.HostTensor(out["out"])
		if err != nil {
			t.Fatal(err)
		}
		return v.F32
	}
	split, whole := run("test-gpu"), run("cpu-ref")
	if len(whole) != 8 || !slices.Equal(split, whole) {
		t.Errorf("three segments give %v, one gives %v", split, whole)
	}
}

// poisonDevice is cpu-ref's device whose Free poisons a host tensor, so a
// buffer freed too early shows in what the caller reads.
type poisonDevice struct{ backends.Device }

func (d poisonDevice) Free(b backends.Buffer) error {
	if t, ok := b.(*backends.Tensor); ok {
		for i := range t.F32 {
			t.F32[i] = float32(math.NaN())
		}
	}
	return d.Device.Free(b)
}

// TestRunnerKeepsOutputInputs: an uploaded input that is also a graph
// output is not freed at the end of the call.
func TestRunnerKeepsOutputInputs(t *testing.T) {
	g := ir.NewGraph("decode")
	x := g.Source("input", ir.T(ir.F32, "B", 4), ir.Attrs{"name": "x"})
	g.SetOutput("x", x)
	g.SetOutput("y", g.Add("sigmoid", nil, x))
	pl, err := backends.Schedule(g, "cpu-ref")
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := backends.Get("cpu-ref")
	dev, err := ref.Open()
	if err != nil {
		t.Fatal(err)
	}
	r, err := backends.NewRunner(pl, map[string]backends.Device{"cpu-ref": poisonDevice{dev}})
	if err != nil {
		t.Fatal(err)
	}
	in := &backends.Tensor{DType: ir.F32, Shape: []int{1, 4}, F32: []float32{1, 2, 3, 4}}
	out, err := r.Run(&backends.Call{B: 1, S: 1, M: 1, Inputs: map[string]*backends.Tensor{"x": in}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := backends.HostTensor(out["x"])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.F32, []float32{1, 2, 3, 4}) {
		t.Errorf("output x reads %v after the call, want the input [1 2 3 4]", v.F32)
	}
}
