package example_test

import (
	"math"
	"testing"

	"github.com/ds4go/ds4/backends/backendtest"
	"github.com/ds4go/ds4/backends/backendtest/example"
	_ "github.com/ds4go/ds4/backends/cpu"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
	"github.com/ds4go/ds4/passes"
)

// TestConformance: the suite runs the cases of the two ops it claims.
func TestConformance(t *testing.T) { backendtest.Run(t, example.Name) }

// TestTinyEndToEnd opens the tiny checkpoint's compiled plan on the
// example backend through the engine, checks that the placement puts the
// claimed ops on it (and nothing else), and that a prefill and a decode
// step give the logits of cpu-ref bit for bit (the kernels are the same).
func TestTinyEndToEnd(t *testing.T) {
	dir := dstest.TinyDir()
	logits := map[string][]float32{}
	for _, be := range []string{example.Name, "cpu-ref"} {
		m := tinyPlan(t)
		md, err := engine.Open(m, dir, be)
		if err != nil {
			t.Fatal(err)
		}
		if be == example.Name {
			on := md.Placement.ByBackend()[example.Name]
			if on["rmsnorm"] == 0 || on["hc_pre"] == 0 || on["weight"] == 0 {
				t.Errorf("decode placement on %s: %v, want its rmsnorm and hc_pre nodes and their weights", example.Name, on)
			}
			for op := range on {
				if op != "rmsnorm" && op != "hc_pre" && op != "weight" {
					t.Errorf("op %s placed on %s, which does not claim it", op, example.Name)
				}
			}
			t.Logf("decode graph on %s: %v; on cpu-ref: %s", example.Name, on, md.Placement.FallbackOps())
		}
		s, err := md.NewSession(engine.Options{Batch: 1, MaxLen: 16})
		if err != nil {
			t.Fatal(err)
		}
		pre, err := s.Prefill([][]int64{{5, 17, 99, 3}})
		if err != nil {
			t.Fatalf("%s prefill: %v", be, err)
		}
		dec, err := s.Decode([]int64{42})
		if err != nil {
			t.Fatalf("%s decode: %v", be, err)
		}
		logits[be] = append(append([]float32(nil), pre.Data...), dec.Data...)
		s.Close()
		md.Close()
	}
	got, want := logits[example.Name], logits["cpu-ref"]
	if len(got) != len(want) || len(want) == 0 {
		t.Fatalf("%d logits, want %d", len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("logit %d: %s %g, cpu-ref %g", i, example.Name, got[i], want[i])
		}
	}
}

// tinyPlan is the tiny checkpoint's module after the default passes.
func tinyPlan(t *testing.T) *ir.Module {
	t.Helper()
	m := dstest.BuildTiny(t)
	if _, err := passes.Run(m, nil, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	return m
}
