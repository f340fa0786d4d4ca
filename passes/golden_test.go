package passes_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/passes"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenCase is one hand-made graph for one pass. The graph is written to
// testdata/<pass>/<name>.in.ir (when missing or with -update); the test
// parses that file, runs the pass, renumbers, and compares with
// <name>.out.ir.
type goldenCase struct {
	pass, name string
	build      func() *ir.Graph
	// check, when set, is an extra assertion on the output graph.
	check func(t *testing.T, g *ir.Graph)
}

func TestGoldenPasses(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.pass+"/"+c.name, func(t *testing.T) {
			dir := filepath.Join("testdata", c.pass)
			in := filepath.Join(dir, c.name+".in.ir")
			out := filepath.Join(dir, c.name+".out.ir")
			if _, err := os.Stat(in); *update || err != nil {
				g := c.build()
				if err := ir.Verify(g); err != nil {
					t.Fatalf("hand-made graph: %v", err)
				}
				writeFile(t, in, ir.Format(&ir.Module{Graphs: []*ir.Graph{g}}))
			}
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			m, err := ir.Parse(string(src))
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			p := findPass(t, c.pass)
			for _, g := range m.Graphs {
				if err := p.Run(g); err != nil {
					t.Fatal(err)
				}
				if err := ir.Verify(g); err != nil {
					t.Fatalf("after %s: %v", c.pass, err)
				}
				g.Renumber()
				if c.check != nil {
					c.check(t, g)
				}
			}
			got := ir.Format(m)
			if *update {
				writeFile(t, out, got)
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("%s after %s differs from %s:\n%s", in, c.pass, out, got)
			}
			// Running the pass again changes nothing (idempotence).
			for _, g := range m.Graphs {
				if err := p.Run(g); err != nil {
					t.Fatal(err)
				}
				g.Renumber()
			}
			if again := ir.Format(m); again != got {
				t.Errorf("%s is not idempotent:\n%s", c.pass, again)
			}
		})
	}
}

func findPass(t *testing.T, name string) passes.Pass {
	for _, p := range passes.Pipeline {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no pass %q", name)
	return passes.Pass{}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantOps(counts map[string]int) func(t *testing.T, g *ir.Graph) {
	return func(t *testing.T, g *ir.Graph) {
		t.Helper()
		oc := g.OpCounts()
		for op, n := range counts {
			if oc[op] != n {
				t.Errorf("%d %s nodes, want %d", oc[op], op, n)
			}
		}
	}
}

// probeNames lists the probe names in order.
func probeNames(g *ir.Graph) string {
	var s []string
	for _, n := range g.Nodes {
		if n.Op == "probe" {
			s = append(s, n.Attrs.Str("name", ""))
		}
	}
	return strings.Join(s, ",")
}
