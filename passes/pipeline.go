package passes

import (
	"fmt"
	"strings"
	"time"

	"github.com/ds4go/ds4/ir"
)

// Pass is one step of the pipeline. Run rewrites one graph in place; a
// broken invariant inside a pass is a compiler bug and may panic: Run
// (the pipeline) recovers it into an error naming the pass and the graph.
type Pass struct {
	Name string
	// Optional passes may be left out (names given to Run, or "none");
	// required ones always run.
	Optional bool
	Run      func(*ir.Graph) error
}

// Pipeline is the one ordered list of passes. The clean-ups run first so
// that the fusions see canonical patterns (CSE merges the repeated reads of
// the same value), the fusions next, the clean-ups again to remove what the
// fusions left, and renumber last.
var Pipeline = []Pass{
	{Name: "canonicalize", Optional: true, Run: Canonicalize},
	{Name: "fold-constants", Optional: true, Run: FoldConstants},
	{Name: "cse", Optional: true, Run: CSE},
	{Name: "dce", Optional: true, Run: DCE},
	{Name: "fuse-hc-mix", Optional: true, Run: FuseHCMix},
	{Name: "fuse-sinkhorn", Optional: true, Run: FuseSinkhorn},
	{Name: "fuse-swiglu", Optional: true, Run: FuseSwiGLU},
	{Name: "canonicalize", Optional: true, Run: Canonicalize},
	{Name: "cse", Optional: true, Run: CSE},
	{Name: "dce", Optional: true, Run: DCE},
	{Name: "renumber", Run: Renumber},
	{Name: "assign-buffers", Run: AssignBuffers},
	{Name: "bounded-rows", Optional: true, Run: BoundedRows},
}

// PassNames lists the distinct pass names in pipeline order.
func PassNames() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range Pipeline {
		if !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, p.Name)
		}
	}
	return out
}

// Renumber gives the nodes consecutive IDs (always the last pass).
func Renumber(g *ir.Graph) error { g.Renumber(); return nil }

// Options control a pipeline run.
type Options struct {
	// VerifyEach runs ir.Verify on every graph before the pipeline and
	// after every pass (tests set it).
	VerifyEach bool
	// DumpAfter names a pass after which Dump receives the IR text of every
	// graph ("all": after every pass). Empty: no dumps.
	DumpAfter string
	Dump      func(pass, graph, text string)
}

// PassTiming is one pass run on one graph.
type PassTiming struct {
	Pass, Graph             string
	Duration                time.Duration
	NodesBefore, NodesAfter int
}

// Report is what a pipeline run did.
type Report struct {
	Passes []PassTiming
	// Ran lists the passes applied, in order (a pass listed twice in the
	// pipeline appears twice).
	Ran []string
}

// Timings formats the report as the -time-passes table.
func (r *Report) Timings() string {
	var b strings.Builder
	var total time.Duration
	fmt.Fprintf(&b, "%-16s %-8s %12s %8s %8s\n", "pass", "graph", "time", "before", "after")
	for _, p := range r.Passes {
		total += p.Duration
		fmt.Fprintf(&b, "%-16s %-8s %12s %8d %8d\n", p.Pass, p.Graph, p.Duration.Round(time.Microsecond), p.NodesBefore, p.NodesAfter)
	}
	fmt.Fprintf(&b, "%-16s %-8s %12s\n", "total", "", total.Round(time.Microsecond))
	return b.String()
}

// Select returns the pipeline entries to run for names: nil runs the whole
// pipeline, []string{"none"} only the required passes, otherwise the
// pipeline entries whose names are listed (in pipeline order) plus the
// required ones. An unknown name is an error.
func Select(names []string) ([]Pass, error) {
	if names == nil {
		return Pipeline, nil
	}
	want := map[string]bool{}
	known := map[string]bool{"none": true}
	for _, p := range Pipeline {
		known[p.Name] = true
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if !known[n] {
			return nil, fmt.Errorf("unknown pass %q (known: %s)", n, strings.Join(PassNames(), ", "))
		}
		want[n] = true
	}
	var out []Pass
	for _, p := range Pipeline {
		if !p.Optional || want[p.Name] {
			out = append(out, p)
		}
	}
	return out, nil
}

// Run applies the selected passes (see Select) to every graph of m, in
// pipeline order, each pass over all graphs before the next.
func Run(m *ir.Module, names []string, opts Options) (*Report, error) {
	list, err := Select(names)
	if err != nil {
		return nil, err
	}
	if opts.DumpAfter != "" && opts.DumpAfter != "all" {
		found := false
		for _, p := range list {
			found = found || p.Name == opts.DumpAfter
		}
		if !found {
			return nil, fmt.Errorf("-dump-after: pass %q is not in the pipeline run", opts.DumpAfter)
		}
	}
	if opts.VerifyEach {
		for _, g := range m.Graphs {
			if err := ir.Verify(g); err != nil {
				return nil, fmt.Errorf("before the pipeline: %v", err)
			}
		}
	}
	rep := &Report{}
	for _, p := range list {
		rep.Ran = append(rep.Ran, p.Name)
		for _, g := range m.Graphs {
			t := PassTiming{Pass: p.Name, Graph: g.Name, NodesBefore: len(g.Nodes)}
			start := time.Now()
			err := runOne(p, g)
			t.Duration = time.Since(start)
			t.NodesAfter = len(g.Nodes)
			rep.Passes = append(rep.Passes, t)
			if err != nil {
				return rep, err
			}
			if opts.VerifyEach {
				if err := ir.Verify(g); err != nil {
					return rep, fmt.Errorf("after pass %s: %v", p.Name, err)
				}
			}
			if opts.Dump != nil && (opts.DumpAfter == "all" || opts.DumpAfter == p.Name) {
				opts.Dump(p.Name, g.Name, ir.FormatGraph(g))
			}
		}
	}
	return rep, nil
}

// runOne runs a pass and turns a panic into an error naming it.
func runOne(p Pass, g *ir.Graph) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pass %s on graph %s: internal error: %v", p.Name, g.Name, r)
		}
	}()
	if err := p.Run(g); err != nil {
		return fmt.Errorf("pass %s on graph %s: %w", p.Name, g.Name, err)
	}
	return nil
}

// ParseNames turns the -passes flag into Run's names: "default" (or "") is
// the whole pipeline (nil), "none" only the required passes, otherwise a
// comma-separated list.
func ParseNames(flag string) []string {
	switch flag = strings.TrimSpace(flag); flag {
	case "", "default":
		return nil
	case "none":
		return []string{"none"}
	}
	return strings.Split(flag, ",")
}
