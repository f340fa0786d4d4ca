package enginetest

import (
	"path/filepath"
	"testing"

	_ "github.com/ds4go/ds4/backends/cpu" // cpu and cpu-ref, the end of every fallback chain
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
)

// TeacherRun runs the golden prompt and decode tokens of golden on the
// checkpoint in dir with backend, block inputs forced from the golden file,
// and returns the trace it wrote (in a test temp dir) and the placement of
// the decode graph's ops on backends.
func TeacherRun(tb testing.TB, m *ir.Module, dir, golden, backend string) (string, map[string]map[string]int) {
	tb.Helper()
	gf, err := safetensors.Open(golden)
	if err != nil {
		tb.Fatal(err)
	}
	defer gf.Close()
	model, err := engine.Open(m, dir, backend)
	if err != nil {
		tb.Fatal(err)
	}
	defer model.Close()
	prompt := dstest.IDs(tb, gf, "inputs.input_ids")
	dec := dstest.IDs(tb, gf, "inputs.decode_input_ids")
	s, err := model.NewSession(engine.Options{Batch: len(prompt), MaxLen: 64})
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	s.Tracer = engine.NewTracer(true, gf)
	if _, err := s.Prefill(prompt); err != nil {
		tb.Fatal(err)
	}
	for i := range dec[0] {
		col := make([]int64, len(dec))
		for b := range dec {
			col[b] = dec[b][i]
		}
		if _, err := s.Decode(col); err != nil {
			tb.Fatalf("decode %d: %v", i, err)
		}
	}
	out := filepath.Join(tb.TempDir(), backend+".safetensors")
	if err := s.Tracer.Write(out); err != nil {
		tb.Fatal(err)
	}
	var placed map[string]map[string]int
	if model.Placement != nil {
		placed = model.Placement.ByBackend()
	}
	return out, placed
}
