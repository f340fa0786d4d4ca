package passes_test

import (
	"strings"
	"testing"

	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
	"github.com/ds4go/ds4/passes"
)

func buildTiny(t *testing.T) *ir.Module { return dstest.BuildTiny(t) }

// TestPipelineTiny runs the whole pipeline on the tiny model, verifying
// after every pass, and checks that probes keep their names and order.
func TestPipelineTiny(t *testing.T) {
	m := buildTiny(t)
	probes := map[string]string{}
	for _, g := range m.Graphs {
		probes[g.Name] = probeNames(g)
	}
	var dumped []string
	rep, err := passes.Run(m, nil, passes.Options{VerifyEach: true, DumpAfter: "fuse-sinkhorn",
		Dump: func(pass, graph, text string) { dumped = append(dumped, pass+"/"+graph) }})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(dumped, " "); got != "fuse-sinkhorn/prefill fuse-sinkhorn/decode fuse-sinkhorn/chunk" {
		t.Errorf("dumps: %s", got)
	}
	if len(rep.Passes) != 3*len(passes.Pipeline) || !strings.Contains(rep.Timings(), "fuse-swiglu") {
		t.Errorf("report: %d entries\n%s", len(rep.Passes), rep.Timings())
	}
	for _, g := range m.Graphs {
		if got := probeNames(g); got != probes[g.Name] {
			t.Errorf("graph %s: probes changed:\n%s\nwant\n%s", g.Name, got, probes[g.Name])
		}
		for i, n := range g.Nodes {
			if n.ID != i {
				t.Fatalf("graph %s not renumbered at %d", g.Name, i)
			}
		}
		oc := g.OpCounts()
		if oc["hc_mix"] != 16 || oc["hc_split_sinkhorn"] != 16 || oc["swiglu_clamp"] != 16 {
			t.Errorf("graph %s: fused ops %d/%d/%d, want 16 each", g.Name, oc["hc_mix"], oc["hc_split_sinkhorn"], oc["swiglu_clamp"])
		}
	}
	// The text form of the result parses back to the same text.
	text := ir.Format(m)
	back, err := ir.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if ir.Format(back) != text {
		t.Error("Format/Parse round trip differs after the pipeline")
	}
}

func TestSelect(t *testing.T) {
	none, err := passes.Select([]string{"none"})
	if err != nil || len(none) != 2 || none[0].Name != "renumber" || none[1].Name != "assign-buffers" {
		t.Errorf("none: %v %v", none, err)
	}
	some, err := passes.Select([]string{"dce", "fuse-swiglu"})
	if err != nil || len(some) != 5 { // dce twice, fuse-swiglu, renumber, assign-buffers
		t.Errorf("dce,fuse-swiglu: %d passes, %v", len(some), err)
	}
	if _, err := passes.Select([]string{"no-such-pass"}); err == nil || !strings.Contains(err.Error(), "no-such-pass") {
		t.Errorf("unknown pass: %v", err)
	}
	if _, err := passes.Run(buildTiny(t), []string{"dce"}, passes.Options{DumpAfter: "cse"}); err == nil {
		t.Error("dump after a pass that does not run: no error")
	}
}

// TestPanicRecovered checks that a panicking pass becomes an error naming it.
func TestPanicRecovered(t *testing.T) {
	saved := passes.Pipeline
	defer func() { passes.Pipeline = saved }()
	passes.Pipeline = append([]passes.Pass{{Name: "boom", Optional: true, Run: func(*ir.Graph) error { panic("broken invariant") }}}, saved...)
	_, err := passes.Run(buildTiny(t), nil, passes.Options{})
	if err == nil || !strings.Contains(err.Error(), "pass boom") || !strings.Contains(err.Error(), "broken invariant") {
		t.Errorf("got %v", err)
	}
}

// TestVerifyEachCatchesBrokenPass checks that a pass leaving an invalid
// graph is reported with its name.
func TestVerifyEachCatchesBrokenPass(t *testing.T) {
	saved := passes.Pipeline
	defer func() { passes.Pipeline = saved }()
	passes.Pipeline = []passes.Pass{{Name: "breaker", Optional: true, Run: func(g *ir.Graph) error {
		g.Nodes = append(g.Nodes[1:], g.Nodes[0]) // use before definition
		return nil
	}}}
	_, err := passes.Run(buildTiny(t), nil, passes.Options{VerifyEach: true})
	if err == nil || !strings.Contains(err.Error(), "after pass breaker") {
		t.Errorf("got %v", err)
	}
}

func TestParseNames(t *testing.T) {
	if passes.ParseNames("default") != nil || passes.ParseNames("none")[0] != "none" || len(passes.ParseNames("dce,cse")) != 2 {
		t.Error("ParseNames")
	}
	rep, err := passes.Run(buildTiny(t), passes.ParseNames("none"), passes.Options{})
	if err != nil || strings.Join(rep.Ran, ",") != "renumber,assign-buffers" {
		t.Errorf("ran %v, %v", rep.Ran, err)
	}
}
