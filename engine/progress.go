package engine

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ds4go/ds4/ir"
)

// ProgressOutput receives the load progress of Open. nil (the default)
// means os.Stderr when it is a terminal and nothing otherwise, so that
// redirected logs stay clean.
var ProgressOutput io.Writer

// progressDelay is how long a load runs before the progress line appears,
// and progressEvery the least time between two updates.
const (
	progressDelay = 300 * time.Millisecond
	progressEvery = 100 * time.Millisecond
)

// loadProgress shows the tensors bound and their bytes while Open binds a
// checkpoint: "binding weights: 120/480 tensors, 1.2 GiB of 4.7 GiB".
type loadProgress struct {
	out          io.Writer
	b            *binder
	seen         map[string]bool
	tensors, all int
	bytes, total int64
	mapped       int64
	start, last  time.Time
	shown        bool
}

func progressWriter() io.Writer {
	if ProgressOutput != nil {
		return ProgressOutput
	}
	if st, err := os.Stderr.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		return os.Stderr
	}
	return nil
}

// newLoadProgress counts the distinct weights of the graphs; it is inert
// (every method a no-op) when there is nowhere to show it.
func newLoadProgress(b *binder, gs ...*ir.Graph) *loadProgress {
	p := &loadProgress{out: progressWriter(), b: b, start: time.Now()}
	if p.out == nil {
		return p
	}
	p.seen = map[string]bool{}
	for _, g := range gs {
		for _, n := range g.Nodes {
			if n.Op != "weight" || p.seen[key(n)] {
				continue
			}
			p.seen[key(n)] = true
			p.all++
			p.total += b.storedBytes(n)
		}
	}
	clear(p.seen)
	p.mapped = b.checkpointBytes()
	return p
}

func key(n *ir.Node) string { return n.Attrs.Str("name", "") + "|" + n.Type.String() }

// bound records one bound weight node.
func (p *loadProgress) bound(n *ir.Node) {
	if p.out == nil || p.seen[key(n)] {
		return
	}
	p.seen[key(n)] = true
	p.tensors++
	p.bytes += p.b.storedBytes(n)
	now := time.Now()
	if now.Sub(p.start) < progressDelay || now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	p.show(false)
}

func (p *loadProgress) show(final bool) {
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(p.bytes) / float64(p.total)
	}
	end := ""
	if final {
		end = fmt.Sprintf(" in %.1fs\n", time.Since(p.start).Seconds())
	}
	fmt.Fprintf(p.out, "\rbinding weights: %d/%d tensors, %s of %s (%3.0f%%), %s mapped\x1b[K%s",
		p.tensors, p.all, FormatBytes(p.bytes), FormatBytes(p.total), pct, FormatBytes(p.mapped), end)
	p.shown = true
}

// done ends the progress line (only if one was shown).
func (p *loadProgress) done() {
	if p.out == nil || !p.shown {
		return
	}
	p.show(true)
	p.out = nil
}

// prefillProgress shows a chunked prefill's progress on a terminal, as
// loadProgress does the binding: "prefill: 8192/65536 tokens, 412.3
// tokens/s, 2m09s left". It is inert where there is nowhere to show it.
type prefillProgress struct {
	out         io.Writer
	total       int
	start, last time.Time
	shown       bool
}

func newPrefillProgress(total int) *prefillProgress {
	return &prefillProgress{out: progressWriter(), total: total, start: time.Now()}
}

// done records that the prompt's first n tokens are in.
func (p *prefillProgress) done(n int) {
	if p.out == nil {
		return
	}
	now := time.Now()
	if n < p.total && (now.Sub(p.start) < progressDelay || now.Sub(p.last) < progressEvery) {
		return
	}
	if n >= p.total && !p.shown {
		return
	}
	p.last = now
	el := now.Sub(p.start).Seconds()
	rate := float64(n) / max(el, 1e-9)
	left := time.Duration(float64(p.total-n) / max(rate, 1e-9) * float64(time.Second)).Round(time.Second)
	var end string
	if n >= p.total {
		end = fmt.Sprintf(" in %.1fs\x1b[K\n", el)
	} else {
		end = fmt.Sprintf(", %s left\x1b[K", left)
	}
	fmt.Fprintf(p.out, "\rprefill: %d/%d tokens, %.1f tokens/s%s", n, p.total, rate, end)
	p.shown = true
}
