package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ds4go/ds4/internal/safetensors"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/tokenizer"
)

// engramTokenizerOnly turns a tiny checkpoint copy into one whose Engram
// token map must be derived: no engram_token_map.safetensors, and
// tokenizer.json holding tok (the tiny tokenizer when nil).
func engramTokenizerOnly(t *testing.T, dir string, tok []byte) {
	t.Helper()
	if tok == nil {
		var err error
		if tok, err = os.ReadFile(filepath.Join(tinyDir(), "tokenizer.json")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "engram_token_map.safetensors")); err != nil {
		t.Fatal(err)
	}
	errsWrite(t, filepath.Join(dir, "tokenizer.json"), string(tok))
}

func init() {
	errsCases = append(errsCases, []errsCase{
		// The tiny tokenizer's map has 430 compressed ids; the tiny config
		// (made for its synthetic map) says 400.
		{name: "token-map-derived-count", cmd: "exec", want: `tokenizer.json: the Engram token map derived from it has 430 compressed ids, but `,
			setup: errsExecModel(func(t *testing.T, dir string) { engramTokenizerOnly(t, dir, nil) })},
		{name: "token-map-derived-tokenizer", cmd: "exec", want: `tokenizer.json: not a tokenizer.json: `,
			setup: errsExecModel(func(t *testing.T, dir string) { engramTokenizerOnly(t, dir, []byte("{")) })},
	}...)
}

func writeTokenMap(t *testing.T, dir string, m []int64) {
	t.Helper()
	if err := safetensors.WriteFile(filepath.Join(dir, "engram_token_map.safetensors"),
		[]safetensors.WriteTensor{{Name: "token_map", DType: "I64", Shape: []int{len(m)}, Data: safetensors.I64Bytes(m)}}, nil); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint without engram_token_map.safetensors runs on the map derived
// from its tokenizer.json, exactly as with that map written to the file.
func TestEngramTokenMapDerivedByExec(t *testing.T) {
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	root := t.TempDir()
	fx := &errsFixture{bin: binDir}
	derived := copyTinyCheckpoint(t, root)
	engramTokenizerOnly(t, derived, nil)
	cfgPath := filepath.Join(derived, "config.json")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// The tiny config counts its synthetic map; give it the tokenizer's.
	edited := strings.Replace(string(cfg), `"engram_compressed_vocab_size": 400`, `"engram_compressed_vocab_size": 430`, 1)
	if edited == string(cfg) {
		t.Fatal("config.json has no engram_compressed_vocab_size 400")
	}
	errsWrite(t, cfgPath, edited)

	file := copyTinyCheckpoint(t, root)
	errsWrite(t, filepath.Join(file, "config.json"), edited)
	tok, err := tokenizer.Load(filepath.Join(derived, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := deepseekv4.EngramTokenMap(tok)
	writeTokenMap(t, file, m)

	// The synthetic map, under the same config, tells the maps apart.
	// (Rewritten without its metadata, which counts 400.)
	synthetic := copyTinyCheckpoint(t, root)
	errsWrite(t, filepath.Join(synthetic, "config.json"), edited)
	f, err := safetensors.Open(filepath.Join(synthetic, "engram_token_map.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	x, _ := f.Get("token_map")
	sm, err := x.Int64s()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	writeTokenMap(t, synthetic, sm)

	plan := filepath.Join(root, "p.plan")
	if r := errsRun(t, fx, root, "compile", "-model", derived, "-o", plan); r.code != 0 {
		t.Fatalf("compile: %s", r.stderr)
	}
	var dumps [3][]byte
	for i, dir := range []string{derived, file, synthetic} {
		out := filepath.Join(root, "out"+string(rune('a'+i))+".safetensors")
		r := errsRun(t, fx, root, "exec", "-plan", plan, "-model", dir, "-prompt-ids", "5,6,7,8;9,10,11,12", "-max-new-tokens", "4", "-dump", out)
		if r.code != 0 {
			t.Fatalf("exec -model %s: exit %d: %s", dir, r.code, r.stderr)
		}
		if dumps[i], err = os.ReadFile(out); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(dumps[0], dumps[1]) {
		t.Error("the run on the derived map differs from the run on the same map read from engram_token_map.safetensors")
	}
	if bytes.Equal(dumps[0], dumps[2]) {
		t.Error("the run on the derived map equals the run on the synthetic map: the test cannot tell maps apart")
	}
}
