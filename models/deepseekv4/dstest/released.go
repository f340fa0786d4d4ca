package dstest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/passes"
	"github.com/ds4go/ds4/synth"
)

// DefaultModule builds the module of the config in folder path with the
// default passes.
func DefaultModule(tb testing.TB, path string) (*deepseekv4.Config, *ir.Module) {
	tb.Helper()
	return ConfigModule(tb, filepath.Join(path, "config.json"))
}

// ConfigModule builds the module of a config file with the default passes.
func ConfigModule(tb testing.TB, file string) (*deepseekv4.Config, *ir.Module) {
	tb.Helper()
	cfg, err := deepseekv4.LoadConfig(file)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := deepseekv4.BuildModule(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := passes.Run(m, passes.ParseNames("default"), passes.Options{}); err != nil {
		tb.Fatal(err)
	}
	return cfg, m
}

// ReleasedModule builds testdata/dir's module with the default passes and
// returns it with the folder of its checkpoint: unseen6 ships its config
// and golden file only, so its checkpoint is synth's for seed 1
// (testdata/unseen6/README.md), written to a temporary folder.
func ReleasedModule(tb testing.TB, dir string) (*ir.Module, string) {
	tb.Helper()
	path := filepath.Join(RepoRoot(), "testdata", dir)
	cfg, m := DefaultModule(tb, path)
	if _, err := os.Stat(filepath.Join(path, "model.safetensors.index.json")); err != nil {
		path = tb.TempDir()
		if err := synth.Write(path, cfg, 1, synth.Options{}); err != nil {
			tb.Fatal(err)
		}
	}
	return m, path
}
