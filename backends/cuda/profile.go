package cuda

import (
	"fmt"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/ir"
)

var _ backends.Profiler = (*GPU)(nil)

// ProbeBandwidth implements backends.Profiler: a device-to-device copy of
// bytes/2 between two buffers (bytes read + written), best of 5 timed by
// CUDA events, in bytes per second.
func (g *GPU) ProbeBandwidth(bytes int64) (float64, error) {
	half := max(bytes/2, 1)
	src, err := g.alloc(half, "bandwidth probe source")
	if err != nil {
		return 0, err
	}
	defer g.free(src)
	dst, err := g.alloc(half, "bandwidth probe destination")
	if err != nil {
		return 0, err
	}
	defer g.free(dst)
	t0, err := g.ctx.NewEvent()
	if err != nil {
		return 0, err
	}
	defer t0.Destroy()
	t1, err := g.ctx.NewEvent()
	if err != nil {
		return 0, err
	}
	defer t1.Destroy()
	if err := g.st.Memset(src, 1, int(half), "bandwidth probe"); err != nil {
		return 0, err
	}
	best := float32(0)
	for range 6 { // the first pass warms up
		if err := t0.Record(g.st); err != nil {
			return 0, err
		}
		if err := g.st.Copy(dst, src, int(half), "bandwidth probe"); err != nil {
			return 0, err
		}
		if err := t1.Record(g.st); err != nil {
			return 0, err
		}
		ms, err := t1.Since(t0)
		if err != nil {
			return 0, err
		}
		if ms > 0 && (best == 0 || ms < best) {
			best = ms
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("cuda bandwidth probe of %s: no time measured", driver.Size(uint64(bytes)))
	}
	return float64(2*half) / (float64(best) * 1e-3), nil
}

// Counters implements backends.Profiler: kernels launched by the host
// (those recorded into a graph while it is captured included), kernels
// run (direct launches plus each replayed graph's kernels), replays and
// captures.
func (g *GPU) Counters() backends.Counters {
	c := g.st.Counters()
	return backends.Counters{Kernels: c.Kernels, Launches: c.Launches, GraphReplays: c.Replays, GraphCaptures: c.Captures}
}

// GraphUpdates is the number of graph nodes updated in place so that a
// captured graph served a call whose launch parameters differed.
func (g *GPU) GraphUpdates() int64 { return g.st.Counters().Updates }

// opTimer times each node of one call with CUDA events: event i is
// recorded before node i's launches, event n after the last node's.
type opTimer struct {
	ev []*driver.Event
}

// newOpTimer returns a timer for n nodes (events reused across calls).
func (g *GPU) newOpTimer(n int) (*opTimer, error) {
	for len(g.events) < n+1 {
		e, err := g.ctx.NewEvent()
		if err != nil {
			return nil, err
		}
		g.events = append(g.events, e)
	}
	return &opTimer{ev: g.events[:n+1]}, nil
}

// mark records boundary i (nil timer: nothing).
func (t *opTimer) mark(s *driver.Stream, i int) error {
	if t == nil {
		return nil
	}
	return t.ev[i].Record(s)
}

// add waits for the call and adds each node's time to times by op name
// and to nodes by node (either may be nil). A fused run's kernel is
// charged to the node that launches it (the run's last).
func (t *opTimer) add(nodes []*ir.Node, times map[string]*backends.OpTime, byNode map[*ir.Node]*backends.OpTime) error {
	if t == nil {
		return nil
	}
	for i, n := range nodes {
		ms, err := t.ev[i+1].Since(t.ev[i])
		if err != nil {
			return err
		}
		ns := int64(float64(ms) * 1e6)
		if times != nil {
			times[n.Op] = addTime(times[n.Op], ns)
		}
		if byNode != nil {
			byNode[n] = addTime(byNode[n], ns)
		}
	}
	return nil
}

func addTime(ot *backends.OpTime, ns int64) *backends.OpTime {
	if ot == nil {
		ot = &backends.OpTime{}
	}
	ot.Calls++
	ot.Nanos += ns
	return ot
}

// GraphsOff is why a program stopped using graphs (a capture failed: its
// calls run as plain launches), "" when none did.
func (g *GPU) GraphsOff() string {
	for _, p := range g.programs {
		for _, gs := range p.graphs {
			if gs.Off {
				return gs.Why
			}
		}
	}
	return ""
}
