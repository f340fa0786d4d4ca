package deepseekv4

import (
	"path/filepath"
	"testing"

	"github.com/ds4go/ds4/internal/safetensors"
)

const (
	tinyDir        = "../../testdata/tiny"
	releaseCfgPath = "testdata/configs/deepseek-v41-flash.json"
)

func loadTiny(t *testing.T) *Config {
	t.Helper()
	c, err := LoadConfig(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

func loadRelease(t *testing.T) *Config {
	t.Helper()
	c, err := LoadConfig(releaseCfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// openGolden opens a safetensors file of the tiny golden set.
func openGolden(t *testing.T, name string) *safetensors.File {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(tinyDir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func goldenTensor(t *testing.T, f *safetensors.File, name string) *safetensors.Tensor {
	t.Helper()
	x, ok := f.Get(name)
	if !ok {
		t.Fatalf("%s: no tensor %q", f.Path, name)
	}
	return x
}

func goldenInt64s(t *testing.T, f *safetensors.File, name string) ([]int64, []int) {
	t.Helper()
	x := goldenTensor(t, f, name)
	v, err := x.Int64s()
	if err != nil {
		t.Fatal(err)
	}
	return v, x.Shape
}

func goldenFloat32s(t *testing.T, f *safetensors.File, name string) ([]float32, []int) {
	t.Helper()
	x := goldenTensor(t, f, name)
	v, err := x.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v, x.Shape
}
