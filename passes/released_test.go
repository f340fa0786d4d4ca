package passes_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/passes"
)

// releasedConfig is the repository's copy of the released config, relative
// to this package's directory (go test runs in it), so the checks run on a
// fresh clone wherever it is.
var releasedConfig = filepath.Join("..", "models", "deepseekv4", "testdata", "configs", "deepseek-v41-flash.json")

func buildReleased(t *testing.T) (*ir.Module, *deepseekv4.Config) {
	t.Helper()
	c, err := deepseekv4.LoadConfig(releasedConfig)
	if err != nil {
		t.Fatal(err)
	}
	m, err := deepseekv4.BuildModule(c)
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}

// TestReleasedConfig checks the acceptance figures of the pipeline on the
// released config (shapes only, no weights).
func TestReleasedConfig(t *testing.T) {
	before, c := buildReleased(t)
	after, _ := buildReleased(t)
	rep, err := passes.Run(after, nil, passes.Options{VerifyEach: true})
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		t.Log("\n" + rep.Timings())
	}
	st, err := passes.Stats(before, after, 1, 1024)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.MarshalIndent(st, "", "  ")
	t.Logf("stats: %s", js)
	nl := len(c.Layers())
	oa := st.OpsAfter
	if oa["hc_mix"] != 2*nl || oa["hc_split_sinkhorn"] != 2*nl {
		t.Errorf("hc_mix %d, hc_split_sinkhorn %d, want %d each", oa["hc_mix"], oa["hc_split_sinkhorn"], 2*nl)
	}
	if oa["swiglu_clamp"] < 2*nl {
		t.Errorf("swiglu_clamp %d, want ≥ %d", oa["swiglu_clamp"], 2*nl)
	}
	for _, op := range []string{"softmax", "clamp", "silu", "mean_sq", "rsqrt", "sigmoid"} {
		if oa[op] != 0 {
			t.Errorf("%d %s left after the pipeline", oa[op], op)
		}
	}
	// No Sinkhorn step (a sum or div over an hc×hc matrix) may remain; the
	// divs left are the gate's top-k normalisation.
	hc := ir.C(int64(c.HCMult))
	for _, g := range after.Graphs {
		for _, n := range g.Nodes {
			if (n.Op == "div" || n.Op == "sum") && n.Args[0].Type.Shape.Rank() >= 2 {
				s := n.Args[0].Type.Shape
				if s[s.Rank()-1] == hc && s[s.Rank()-2] == hc {
					t.Errorf("graph %s: Sinkhorn step %%%d (%s) left", g.Name, n.ID, n.Op)
				}
			}
		}
	}
	if st.DecodeKernelsAfter*3 > st.DecodeKernelsBefore {
		t.Errorf("decode kernels %d → %d: not 3× fewer", st.DecodeKernelsBefore, st.DecodeKernelsAfter)
	}
	if st.PeakActivationBytes*3 > st.NaiveActivationBytes {
		t.Errorf("peak %d vs naive %d: not 3× below", st.PeakActivationBytes, st.NaiveActivationBytes)
	}
}
