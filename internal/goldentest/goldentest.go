// Package goldentest holds what the tests of several packages need to run the
// tiny golden checkpoint: its location, its module, and a block-local
// (teacher-forced) run that writes a trace. It is imported by tests only.
//
//	m := goldentest.BuildTiny(t)
//	trace, _ := goldentest.TeacherRun(t, m, goldentest.TinyDir(), goldentest.TinyGolden(), "cpu")
package goldentest

import (
	"math"
	"path/filepath"
	"runtime"
	"testing"

	_ "github.com/ds4go/ds4/backends/cpu" // the fallback of every backend
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
)

// RepoRoot is the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TinyDir is the tiny golden checkpoint.
func TinyDir() string { return filepath.Join(RepoRoot(), "testdata", "tiny") }

// TinyGolden is the tiny checkpoint's golden file.
func TinyGolden() string { return filepath.Join(TinyDir(), "golden.safetensors") }

// BuildTiny builds the tiny checkpoint's module (no passes).
func BuildTiny(tb testing.TB) *ir.Module {
	tb.Helper()
	c, err := deepseekv4.LoadConfig(filepath.Join(TinyDir(), "config.json"))
	if err != nil {
		tb.Fatal(err)
	}
	m, err := deepseekv4.BuildModule(c)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// IDs reads a 2-D id tensor of a golden file as rows.
func IDs(tb testing.TB, f *safetensors.File, name string) [][]int64 {
	tb.Helper()
	g, ok := f.Get(name)
	if !ok {
		tb.Fatalf("golden has no %s", name)
	}
	v, err := g.Int64s()
	if err != nil {
		tb.Fatal(err)
	}
	rows := make([][]int64, g.Shape[0])
	for i := range rows {
		rows[i] = v[i*g.Shape[1] : (i+1)*g.Shape[1]]
	}
	return rows
}

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
	prompt := IDs(tb, gf, "inputs.input_ids")
	dec := IDs(tb, gf, "inputs.decode_input_ids")
	s, err := model.NewSession(engine.Options{Batch: len(prompt), MaxLen: 64})
	if err != nil {
		tb.Fatal(err)
	}
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

// RelL2 is ‖got − want‖ / ‖want‖ (the plain norm when want is zero).
func RelL2(got, want []float32) float64 {
	var num, den float64
	for i := range got {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}
