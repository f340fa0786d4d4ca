package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
)

// TestDerivedTokenMapOnce: CheckPlan and then Open on a checkpoint without a
// token map file derive the map once; a changed tokenizer.json derives again.
func TestDerivedTokenMapOnce(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"config.json", TokenizerFile} {
		b, err := os.ReadFile(filepath.Join(dstest.TinyDir(), f))
		if err != nil {
			t.Fatal(err)
		}
		// The tiny config counts its synthetic map; give it the tokenizer's.
		b = bytes.Replace(b, []byte(`"engram_compressed_vocab_size": 400`), []byte(`"engram_compressed_vocab_size": 430`), 1)
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := deepseekv4.LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	first, ok, err := derivedTokenMap(dir, cfg)
	if !ok || err != nil {
		t.Fatalf("derivedTokenMap: ok %v, %v", ok, err)
	}
	again, _, _ := derivedTokenMap(dir, cfg)
	if &again[0] != &first[0] {
		t.Errorf("the second call derived the map again")
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, TokenizerFile), later, later); err != nil {
		t.Fatal(err)
	}
	fresh, _, err := derivedTokenMap(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if &fresh[0] == &first[0] || !slices.Equal(fresh, first) {
		t.Errorf("a changed tokenizer.json: the map was not derived again, or differs")
	}
}
