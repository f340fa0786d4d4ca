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
	host  []time.Duration // after the boundary's work was handed to the driver
	reach []time.Duration // when the host reached the boundary (graphs: before its chunk's RunTape)
	ev    []*driver.Event
	t0    time.Time
	graph bool
	first []time.Duration // the host's time at each node of the first chunk
}

// tlStats is a program's resolved calls: per boundary, the host's and the
// GPU's microseconds since the call began.
type tlStats struct {
	calls, graphCalls int
	nodes             []int
	reach, host, gpu  [][]float64
	first             [][]float64
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
	now := time.Since(c.t0)
	if len(c.reach) == len(c.nodes) { // not reached first: the same instant
		c.reach = append(c.reach, now)
	}
	c.nodes, c.host, c.ev = append(c.nodes, i), append(c.host, now), append(c.ev, e)
	return e.Record(g.st)
}

// reached notes the host's time at a boundary before its chunk is run.
func (c *tlCall) reached() {
	if c != nil {
		c.reach = append(c.reach, time.Since(c.t0))
	}
}

// node notes the host's time at node i of the first chunk.
func (c *tlCall) node(i int) {
	if c != nil && i == len(c.first) {
		c.first = append(c.first, time.Since(c.t0))
	}
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
			s = &tlStats{nodes: c.nodes, reach: make([][]float64, len(c.nodes)), host: make([][]float64, len(c.nodes)), gpu: make([][]float64, len(c.nodes))}
			tl.stats[c.p] = s
		}
		s.calls++
		if c.graph {
			s.graphCalls++
		}
		for k, d := range c.first {
			if k == len(s.first) {
				s.first = append(s.first, nil)
			}
			s.first[k] = append(s.first[k], float64(d.Microseconds()))
		}
		for k := range c.nodes {
			ms, err := c.ev[k].Since(c.ev[0])
			if err != nil {
				return err
			}
			s.reach[k] = append(s.reach[k], float64(c.reach[k].Microseconds()))
			s.host[k] = append(s.host[k], float64(c.host[k].Microseconds()))
			s.gpu[k] = append(s.gpu[k], 1e3*float64(ms))
		}
	}
	tl.pending, tl.used = tl.pending[:0], 0
	return nil
}

// report writes each program's boundaries: node, median host µs when the
// boundary was reached and when its work was handed on, median GPU µs since
// the call's start, and the GPU's µs since the boundary
// before (skipping programs called fewer than twice).
func (tl *timeline) report(w io.Writer) {
	for pi, p := range tl.order {
		s := tl.stats[p]
		if s == nil || s.calls < 2 {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "timeline: program %d (%d nodes), %d calls (%d from graphs): node reach_us host_us gpu_us gpu_chunk_us\n",
			pi, len(p.seg.Nodes), s.calls, s.graphCalls)
		prev := 0.0
		for k, n := range s.nodes {
			r, h, gm := median(s.reach[k]), median(s.host[k]), median(s.gpu[k])
			fmt.Fprintf(&b, "timeline:   %4d %9.1f %9.1f %9.1f %9.1f\n", n, r, h, gm, gm-prev)
			prev = gm
		}
		for k, v := range s.first {
			n := p.seg.Nodes[k]
			fmt.Fprintf(&b, "timeline:   first chunk: node %3d %-16s host %8.1f us\n", k, n.Op, median(v))
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
