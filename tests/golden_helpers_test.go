package tests

import (
	"path/filepath"
	"runtime"
	"testing"

	_ "github.com/ds4go/ds4/backends/cpu"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

func tinyDir() string { return filepath.Join(repoRoot(), "testdata", "tiny") }

func buildTiny(t testing.TB) *ir.Module {
	t.Helper()
	c, err := deepseekv4.LoadConfig(filepath.Join(tinyDir(), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := deepseekv4.BuildModule(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func ids2(t testing.TB, f *safetensors.File, name string) [][]int64 {
	t.Helper()
	g, ok := f.Get(name)
	if !ok {
		t.Fatalf("golden has no %s", name)
	}
	v, err := g.Int64s()
	if err != nil {
		t.Fatal(err)
	}
	rows := make([][]int64, g.Shape[0])
	for i := range rows {
		rows[i] = v[i*g.Shape[1] : (i+1)*g.Shape[1]]
	}
	return rows
}

// teacherRun runs the golden prompt and decode tokens with block inputs
// forced from the golden file and returns the trace written to a temp file.
func teacherRun(t testing.TB, m *ir.Module, dir, golden string) string {
	t.Helper()
	gf, err := safetensors.Open(golden)
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()
	model, err := engine.Open(m, dir, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	prompt := ids2(t, gf, "inputs.input_ids")
	dec := ids2(t, gf, "inputs.decode_input_ids")
	s, err := model.NewSession(engine.Options{Batch: len(prompt), MaxLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	s.Tracer = engine.NewTracer(true, gf)
	if _, err := s.Prefill(prompt); err != nil {
		t.Fatal(err)
	}
	for i := range dec[0] {
		col := make([]int64, len(dec))
		for b := range dec {
			col[b] = dec[b][i]
		}
		if _, err := s.Decode(col); err != nil {
			t.Fatalf("decode %d: %v", i, err)
		}
	}
	out := filepath.Join(t.TempDir(), "trace.safetensors")
	if err := s.Tracer.Write(out); err != nil {
		t.Fatal(err)
	}
	return out
}
