package simtest

import (
	"os"
	"testing"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cuda"
	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
)

func TestMain(m *testing.M) {
	if err := driver.Simulate(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// open opens testdata/dir on the simulated GPU (unseen6: its synth
// checkpoint, written to a temporary folder).
func open(t testing.TB, dir string, graphs bool) (*engine.Model, *cuda.GPU) {
	t.Helper()
	m, path := dstest.ReleasedModule(t, dir)
	opt := "false"
	if graphs {
		opt = "true"
	}
	backends.SetOptions(map[string]string{"cuda-graphs": opt})
	defer backends.SetOptions(nil)
	md, err := engine.Open(m, path, "cuda")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(md.Close)
	return md, md.Device().(*cuda.GPU)
}

// TestDecodeStepsSimulated: a prefill of 11 tokens (B 2) and 16 decode
// steps, past the window and several pooling steps: every decode step
// after the first few is replayed from its graphs, with a few node updates;
// the launches per step are the same with graphs off.
func TestDecodeStepsSimulated(t *testing.T) {
	for _, dir := range []string{"tiny", "unseen6"} {
		t.Run(dir, func(t *testing.T) {
			per := map[bool][]backends.Counters{}
			for _, graphs := range []bool{false, true} {
				md, g := open(t, dir, graphs)
				s, err := md.NewSession(engine.Options{Batch: 2, MaxLen: 40, MaxMemory: -1})
				if err != nil {
					t.Fatal(err)
				}
				p := make([][]int64, 2)
				for b := range p {
					for j := range 11 {
						p[b] = append(p[b], int64(7+31*b+17*j*j)%int64(md.Vocab))
					}
				}
				if _, err := s.Prefill(p); err != nil {
					t.Fatal(err)
				}
				for step := range 16 {
					c0, u0 := g.Counters(), g.GraphUpdates()
					if _, err := s.Decode([]int64{1, 2}); err != nil {
						t.Fatal(err)
					}
					c1 := g.Counters()
					d := backends.Counters{Kernels: c1.Kernels - c0.Kernels, Launches: c1.Launches - c0.Launches,
						GraphReplays: c1.GraphReplays - c0.GraphReplays, GraphCaptures: c1.GraphCaptures - c0.GraphCaptures}
					per[graphs] = append(per[graphs], d)
					if graphs {
						t.Logf("decode step %2d (pos %d): %d kernels, %d host launches, %d replays, %d captures, %d node updates",
							step, 11+step, d.Kernels, d.Launches, d.GraphReplays, d.GraphCaptures, g.GraphUpdates()-u0)
					}
				}
				if why := g.GraphsOff(); why != "" {
					t.Errorf("graphs turned off: %s", why)
				}
				s.Close()
			}
			replays, captures := int64(0), int64(0)
			for k, on := range per[true] {
				off := per[false][k]
				if on.Kernels != off.Kernels {
					t.Errorf("decode step %d: %d kernels with graphs, %d without", k, on.Kernels, off.Kernels)
				}
				if off.GraphReplays != 0 || off.Launches != off.Kernels {
					t.Errorf("decode step %d without graphs: %+v", k, off)
				}
				replays += on.GraphReplays
				captures += on.GraphCaptures
			}
			t.Logf("16 steps: %d replays, %d captures; %d kernels a step without graphs", replays, captures, per[false][0].Kernels)
			// a call runs as one graph per chunk of nodes; the first two
			// steps capture them (the pooling steps alternate two
			// structures), every later step replays them all with no host
			// launch
			for k, on := range per[true][2:] {
				if on.GraphCaptures != 0 || on.GraphReplays == 0 || on.Launches != 0 {
					t.Errorf("decode step %d: %d captures, %d replays, %d host launches; want 0, > 0, 0", k+2, on.GraphCaptures, on.GraphReplays, on.Launches)
				}
			}
		})
	}
}

// TestMemoVerifySimulated runs decode steps with DS4_CUDA_MEMO=verify:
// every memoised node's launcher still runs and must queue exactly what its
// memo holds (across the window, pooling steps, a second session and a new
// batch size).
func TestMemoVerifySimulated(t *testing.T) {
	t.Setenv("DS4_CUDA_MEMO", "verify")
	for _, dir := range []string{"tiny", "unseen6"} {
		t.Run(dir, func(t *testing.T) {
			md, _ := open(t, dir, true)
			for _, batch := range []int{2, 2, 1} {
				s, err := md.NewSession(engine.Options{Batch: batch, MaxLen: 40, MaxMemory: -1})
				if err != nil {
					t.Fatal(err)
				}
				p := make([][]int64, batch)
				for b := range p {
					for j := range 11 {
						p[b] = append(p[b], int64(7+31*b+17*j*j)%int64(md.Vocab))
					}
				}
				if _, err := s.Prefill(p); err != nil {
					t.Fatal(err)
				}
				ids := make([]int64, batch)
				for step := range 20 {
					ids[0] = int64(step)
					if _, err := s.Decode(ids); err != nil {
						t.Fatalf("B %d, decode step %d: %v", batch, step, err)
					}
				}
				s.Close()
			}
		})
	}
}

// TestOpTimesSimulated: with op and node times asked for, every node of a
// decode call is timed (no graph: events around each node), by op name and
// by node alike.
func TestOpTimesSimulated(t *testing.T) {
	md, g := open(t, "tiny", true)
	s, err := md.NewSession(engine.Options{Batch: 1, MaxLen: 16, MaxMemory: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Prefill([][]int64{{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	s.OpTimes, s.NodeTimes = map[string]*backends.OpTime{}, map[*ir.Node]*backends.OpTime{}
	c0 := g.Counters()
	if _, err := s.Decode([]int64{4}); err != nil {
		t.Fatal(err)
	}
	if c := g.Counters(); c.GraphReplays != c0.GraphReplays {
		t.Errorf("a timed call was replayed from a graph")
	}
	var byOp, byNode int64
	calls := 0
	for _, ot := range s.OpTimes {
		byOp += ot.Nanos
		calls += ot.Calls
	}
	for _, ot := range s.NodeTimes {
		byNode += ot.Nanos
	}
	if calls == 0 || calls != len(s.NodeTimes) || byOp != byNode || byOp == 0 {
		t.Errorf("%d op calls, %d nodes timed, %d ns by op, %d by node", calls, len(s.NodeTimes), byOp, byNode)
	}
}
