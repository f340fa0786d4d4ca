package cuda

// CUDA graphs on the GPU: decode calls replayed from captured graphs give
// the logits of plain launches and of cpu-ref bit for bit, across the
// window size and the compressors' pooling steps; a new batch size
// captures anew. They skip without a GPU.

import (
	"math"
	"testing"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
)

// openCUDA opens the model on cuda with graphs on or off, and the exact
// decode products (the graphs are compared with cpu-ref bit for bit).
func openCUDA(t *testing.T, m *ir.Module, path string, graphs bool) (*engine.Model, *GPU) {
	t.Helper()
	opt := "true"
	if !graphs {
		opt = "false"
	}
	backends.SetOptions(map[string]string{"cuda-graphs": opt, "cuda-exact": "true"})
	defer backends.SetOptions(nil)
	md, err := engine.Open(m, path, "cuda")
	if err != nil {
		t.Fatal(err)
	}
	g, ok := md.Device().(*GPU)
	if !ok {
		md.Close()
		t.Fatalf("the cuda model's device is a %T", md.Device())
	}
	return md, g
}

func TestGraphsMatchReferenceOnGPU(t *testing.T) {
	gpu(t)
	for _, dir := range []string{"tiny", "unseen6"} {
		t.Run(dir, func(t *testing.T) {
			m, path := dstest.ReleasedModule(t, dir)
			on, gOn := openCUDA(t, m, path, true)
			defer on.Close()
			off, gOff := openCUDA(t, m, path, false)
			defer off.Close()
			ref, err := engine.Open(m, path, "cpu-ref")
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			if !gOn.graphs || gOff.graphs {
				t.Fatalf("graphs on: %v, off: %v", gOn.graphs, gOff.graphs)
			}
			const steps = 16 // from 11: past the window (8, 16) and several pooling steps (ratios 2, 4)
			p := prompt(int64(on.Vocab), 2, 11)
			c0 := gOn.Counters()
			a, b, r := runGreedy(t, on, p, steps), runGreedy(t, off, p, steps), runGreedy(t, ref, p, steps)
			c1 := gOn.Counters()
			for call := range r.logits {
				if rel, diff := relL2(a.logits[call], r.logits[call]); diff != 0 {
					t.Errorf("call %d: graphs on: %d logits differ from cpu-ref (rel-L2 %.3g)", call, diff, rel)
				}
				if rel, diff := relL2(b.logits[call], r.logits[call]); diff != 0 {
					t.Errorf("call %d: graphs off: %d logits differ from cpu-ref (rel-L2 %.3g)", call, diff, rel)
				}
			}
			t.Logf("graphs on, prefill + %d decode steps: %d captures, %d replays, %d node updates, %d host launches, %d kernels run",
				steps, c1.GraphCaptures-c0.GraphCaptures, c1.GraphReplays-c0.GraphReplays, gOn.GraphUpdates(), c1.Launches-c0.Launches, c1.Kernels-c0.Kernels)
			if why := gOn.GraphsOff(); why != "" {
				t.Errorf("graphs turned off: %s", why)
			}
			if c1.GraphReplays-c0.GraphReplays < steps/2 {
				t.Errorf("%d graph replays in %d decode steps", c1.GraphReplays-c0.GraphReplays, steps)
			}
			if c := gOff.Counters(); c.GraphReplays != 0 || c.GraphCaptures != 0 {
				t.Errorf("graphs off: %d replays, %d captures", c.GraphReplays, c.GraphCaptures)
			}
			// one more decode step each: kernels per step with and without graphs
			for _, x := range []struct {
				name string
				md   *engine.Model
				g    *GPU
			}{{"on", on, gOn}, {"off", off, gOff}} {
				s, err := x.md.NewSession(engine.Options{Batch: 2, MaxLen: 40, MaxMemory: -1})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Prefill(p); err != nil {
					t.Fatal(err)
				}
				for k := range 3 {
					c0 := x.g.Counters()
					if _, err := s.Decode([]int64{1, 2}); err != nil {
						t.Fatal(err)
					}
					c1 := x.g.Counters()
					t.Logf("graphs %s, decode step %d: %d kernels, %d host launches, %d replays, %d captures", x.name, k,
						c1.Kernels-c0.Kernels, c1.Launches-c0.Launches, c1.GraphReplays-c0.GraphReplays, c1.GraphCaptures-c0.GraphCaptures)
				}
				s.Close()
			}
		})
	}
}

// TestGraphsRecaptureOnGPU: a second session (new buffers) and a new batch
// size are served correctly; the new batch size captures anew.
func TestGraphsRecaptureOnGPU(t *testing.T) {
	gpu(t)
	m, path := dstest.ReleasedModule(t, "tiny")
	on, g := openCUDA(t, m, path, true)
	defer on.Close()
	off, _ := openCUDA(t, m, path, false)
	defer off.Close()
	for _, batch := range []int{2, 2, 1, 3} {
		p := prompt(int64(on.Vocab), batch, 9)
		c0 := g.Counters()
		a, b := runGreedy(t, on, p, 5), runGreedy(t, off, p, 5)
		c1 := g.Counters()
		for call := range b.logits {
			if rel, diff := relL2(a.logits[call], b.logits[call]); diff != 0 {
				t.Errorf("B %d, call %d: %d logits differ with graphs (rel-L2 %.3g)", batch, call, diff, rel)
			}
		}
		caps := c1.GraphCaptures - c0.GraphCaptures
		t.Logf("B %d: %d captures, %d replays", batch, caps, c1.GraphReplays-c0.GraphReplays)
		if batch != 2 && caps == 0 {
			t.Errorf("B %d: no capture after a batch size change", batch)
		}
	}
}

// TestProfilerOnGPU: the bandwidth probe gives a plausible figure and
// per-op times are filled when asked for.
func TestProfilerOnGPU(t *testing.T) {
	gpu(t)
	m, path := dstest.ReleasedModule(t, "tiny")
	md, g := openCUDA(t, m, path, true)
	defer md.Close()
	bw, err := g.ProbeBandwidth(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("device copy bandwidth: %.0f GB/s", bw/1e9)
	if bw < 1e11 || bw > 2e13 {
		t.Errorf("bandwidth %.3g B/s is implausible", bw)
	}
	s, err := md.NewSession(engine.Options{Batch: 1, MaxLen: 32, MaxMemory: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	times, nodes := map[string]*backends.OpTime{}, map[*ir.Node]*backends.OpTime{}
	s.OpTimes, s.NodeTimes = times, nodes
	if _, err := s.Prefill(prompt(int64(md.Vocab), 1, 8)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode([]int64{3}); err != nil {
		t.Fatal(err)
	}
	var total int64
	for op, ot := range times {
		total += ot.Nanos
		if ot.Calls == 0 {
			t.Errorf("op %s: 0 calls", op)
		}
	}
	t.Logf("%d ops timed, %.3f ms in all", len(times), float64(total)/1e6)
	var byNode int64
	for _, ot := range nodes {
		byNode += ot.Nanos
	}
	if byNode != total {
		t.Errorf("node times add to %d ns, op times to %d", byNode, total)
	}
	if times["rmsnorm"] == nil || times["rmsnorm"].Nanos <= 0 {
		t.Errorf("rmsnorm not timed: %v", times["rmsnorm"])
	}
}

// TestTapeGraphUpdatesOnGPU drives driver.Tape and driver.Graphs directly:
// a call of an upload, a memset, a kernel and a copy whose upload bytes,
// kernel scalar, memset size and copy size change every step is captured
// once and then replayed with its nodes updated (kernel, memset and memcpy
// nodes, uploads from the step block), each step's results equal to what
// the same work gives launched directly; a call of another structure is
// captured anew. Nine launches that never change pad the call: RunTape
// updates a graph only where at most a quarter of the operations differ
// (else it captures anew), and 3 of the 5 operations above change.
func TestTapeGraphUpdatesOnGPU(t *testing.T) {
	e := gpu(t)
	const n = 1000
	x := alloc(t, e, 4*n)
	out := alloc(t, e, 4*n)
	out2 := alloc(t, e, 4*n)
	pad := alloc(t, e, 4*n)
	gs, tape := &driver.Graphs{}, &driver.Tape{}
	defer gs.Release(e.c)
	defer tape.Free(e.c)
	c0 := e.s.Counters()
	for step := range 6 {
		xs := make([]float32, n)
		for i := range xs {
			xs[i] = float32(i*7%13) + float32(step)/8
		}
		cp, set := 10+step, 100+3*step // copied and zeroed lengths
		e.s.BeginTape(tape)
		if err := Upload(e.s, x, xs, "x"); err != nil {
			t.Fatal(err)
		}
		if err := e.s.Memset(out2, 0xff, 4*n, "out2"); err != nil {
			t.Fatal(err)
		}
		if err := e.s.Memset(out2, 0, 4*set, "out2 head"); err != nil {
			t.Fatal(err)
		}
		if err := e.k.Unary(e.s, "add", out, x, n, "add_scalar", float32(step), 0, false); err != nil {
			t.Fatal(err)
		}
		if err := e.s.Copy(out2, out, 4*cp, "out2 copy"); err != nil {
			t.Fatal(err)
		}
		for range 9 {
			if err := e.k.Unary(e.s, "add", pad, pad, n, "add_scalar", 1, 0, false); err != nil {
				t.Fatal(err)
			}
		}
		if step == 5 { // another structure
			if err := e.k.Unary(e.s, "mul", out, out, n, "mul_scalar", 2, 0, false); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.s.RunTape(e.s.EndTape(), gs); err != nil {
			t.Fatal(err)
		}
		got, got2 := down[float32](t, e, out, n), down[float32](t, e, out2, n)
		for i := range n {
			want := xs[i] + float32(step)
			w2 := want
			if step == 5 {
				want *= 2
			}
			switch {
			case i >= set:
				w2 = math.Float32frombits(0xffffffff)
			case i >= cp:
				w2 = 0
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) || math.Float32bits(got2[i]) != math.Float32bits(w2) {
				t.Fatalf("step %d, element %d: out %v out2 %v, want %v and %v", step, i, got[i], got2[i], want, w2)
			}
		}
	}
	c := e.s.Counters()
	t.Logf("6 calls: %d captures, %d replays, %d node updates, %d host launches, %d kernels", c.Captures-c0.Captures,
		c.Replays-c0.Replays, c.Updates-c0.Updates, c.Launches-c0.Launches, c.Kernels-c0.Kernels)
	if gs.Off {
		t.Fatalf("graphs turned off: %s", gs.Why)
	}
	if c.Captures-c0.Captures != 2 || c.Replays-c0.Replays != 6 || gs.Len() != 2 {
		t.Errorf("%d captures, %d replays, %d graphs; want 2, 6, 2 (last node update refused: %q)", c.Captures-c0.Captures, c.Replays-c0.Replays, gs.Len(), gs.Rejected)
	}
	if c.Updates-c0.Updates < 4*3 { // the kernel's scalar, a memset's and the copy's size, each step 1-4
		t.Errorf("%d node updates in steps 1-4, want at least 12", c.Updates-c0.Updates)
	}
}
