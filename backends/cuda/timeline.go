package cuda

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ds4go/ds4/backends/cuda/driver"
)

// timelineOn is DS4_CUDA_TIMELINE=1: every program call is cut at its
// graph chunks' boundaries (the same node indices with graphs off), and at
// each the host's time since the call began and a CUDA event are taken;
// Close prints, per program and boundary, the medians of both. Where the
// GPU's time of a boundary sits just after the host's, the GPU waited for
// the host; where it sits far after, the host waited for the GPU. It shows
// where graphs and plain launches differ without a profiler on the GPU
// machine (no nsys there).
var timelineOn = os.Getenv("DS4_CUDA_TIMELINE") == "1"

// timeline is the GPU's record of the calls timed since the last Sync (by
// program) and of their resolved times.
type timeline struct {
	pool    []*driver.Event
	used    int
	pending []tlCall
	stats   map[*Program]*tlStats
	order   []*Program // programs in the order first timed
}

// tlCall is one timed call: its marks' nodes, host times and events (the
// first the call's start).
type tlCall struct {
	p     *Program
	nodes []int
	host  []time.Duration
	ev    []*driver.Event
	t0    time.Time
	graph bool
}

// tlStats is a program's resolved calls: per boundary, the host's and the
// GPU's microseconds since the call began.
type tlStats struct {
	calls, graphCalls int
	nodes             []int
	host, gpu         [][]float64
}

// begin starts timing a call of p (nil when the timeline is off, or for a
// call whose ops or nodes are timed or probed: their own events would
// weigh on its times).
func (tl *timeline) begin(g *GPU, p *Program, graph, observed bool) (*tlCall, error) {
	if !timelineOn || observed {
		return nil, nil
	}
	c := &tlCall{p: p, graph: graph, t0: time.Now()}
	return c, c.mark(g, 0)
}

// mark records boundary node i of the call.
func (c *tlCall) mark(g *GPU, i int) error {
	if c == nil {
		return nil
	}
	tl := &g.timeline
	if tl.used == len(tl.pool) {
		e, err := g.ctx.NewEvent()
		if err != nil {
			return err
		}
		tl.pool = append(tl.pool, e)
	}
	e := tl.pool[tl.used]
	tl.used++
	c.nodes, c.host, c.ev = append(c.nodes, i), append(c.host, time.Since(c.t0)), append(c.ev, e)
	return e.Record(g.st)
}

// end queues the call for resolving at the next Sync.
func (c *tlCall) end(g *GPU, i int) error {
	if c == nil {
		return nil
	}
	if err := c.mark(g, i); err != nil {
		return err
	}
	g.timeline.pending = append(g.timeline.pending, *c)
	return nil
}

// resolve reads the pending calls' events (the stream has been synchronised)
// into the stats and frees the events for reuse.
func (tl *timeline) resolve() error {
	for _, c := range tl.pending {
		if tl.stats == nil {
			tl.stats = map[*Program]*tlStats{}
		}
		s := tl.stats[c.p]
		if s == nil || !slices.Equal(s.nodes, c.nodes) {
			if s == nil {
				tl.order = append(tl.order, c.p)
			}
			s = &tlStats{nodes: c.nodes, host: make([][]float64, len(c.nodes)), gpu: make([][]float64, len(c.nodes))}
			tl.stats[c.p] = s
		}
		s.calls++
		if c.graph {
			s.graphCalls++
		}
		for k := range c.nodes {
			ms, err := c.ev[k].Since(c.ev[0])
			if err != nil {
				return err
			}
			s.host[k] = append(s.host[k], float64(c.host[k].Microseconds()))
			s.gpu[k] = append(s.gpu[k], 1e3*float64(ms))
		}
	}
	tl.pending, tl.used = tl.pending[:0], 0
	return nil
}

// report writes each program's boundaries: node, median host µs, median
// GPU µs since the call's start, and the GPU's µs since the boundary
// before (skipping programs called fewer than twice).
func (tl *timeline) report(w io.Writer) {
	for pi, p := range tl.order {
		s := tl.stats[p]
		if s == nil || s.calls < 2 {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "timeline: program %d (%d nodes), %d calls (%d from graphs): node host_us gpu_us gpu_chunk_us\n",
			pi, len(p.seg.Nodes), s.calls, s.graphCalls)
		prev := 0.0
		for k, n := range s.nodes {
			h, gm := median(s.host[k]), median(s.gpu[k])
			fmt.Fprintf(&b, "timeline:   %4d %9.1f %9.1f %9.1f\n", n, h, gm, gm-prev)
			prev = gm
		}
		io.WriteString(w, b.String())
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// close destroys the events.
func (tl *timeline) close() {
	if timelineOn {
		tl.report(os.Stderr)
	}
	for _, e := range tl.pool {
		e.Destroy()
	}
	tl.pool = nil
}
