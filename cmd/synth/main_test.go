package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ds4go/ds4/internal/cli"
)

func TestRun(t *testing.T) {
	tiny := filepath.Join("..", "..", "testdata", "tiny", "config.json")
	out := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"-o", out}, 2},
		{[]string{"-config", tiny}, 2},
		{[]string{"-config", "/nonexistent.json", "-o", out}, 2},
		{[]string{"-config", tiny, "-o", out, "-shard-mb", "0"}, 2},
		{[]string{"-config", tiny, "-o", out, "-bogus"}, 2},
		{[]string{"-config", tiny, "-o", out, "-seed", "3", "-shard-mb", "1"}, 0},
	} {
		if got := cli.Run("synth", run, tc.args); got != tc.code {
			t.Errorf("synth %v: exit %d, want %d", tc.args, got, tc.code)
		}
	}
	for _, f := range []string{"config.json", "model.safetensors.index.json", "model-00001-of-00003.safetensors", "engram_token_map.safetensors"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}
