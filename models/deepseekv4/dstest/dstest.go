package dstest

import (
	"math"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
)

// RepoRoot is the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
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
