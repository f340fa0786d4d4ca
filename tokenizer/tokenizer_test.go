package tokenizer

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"slices"
	"sync"
	"testing"
)

// deepseek loads DeepSeek V3's real tokenizer.json (testdata/README.md).
var deepseek = sync.OnceValues(func() (*Tokenizer, error) {
	f, err := os.Open("testdata/deepseek_v3_tokenizer.json.gz")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(z)
	if err != nil {
		return nil, err
	}
	return Parse(data, "deepseek_v3_tokenizer.json")
})

func loadDeepSeek(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := deepseek()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type golden struct {
	Text    string  `json:"text"`
	IDs     []int64 `json:"ids"`
	Decoded string  `json:"decoded"`
}

func loadGolden(t *testing.T) []golden {
	data, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g []golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g) < 50 {
		t.Fatalf("only %d golden vectors", len(g))
	}
	return g
}

// TestGolden matches Hugging Face's ids id for id (testdata/mkgolden.mjs)
// and checks that decoding gives back the text.
func TestGolden(t *testing.T) {
	tok := loadDeepSeek(t)
	for i, g := range loadGolden(t) {
		ids := tok.Encode(g.Text)
		if !slices.Equal(ids, g.IDs) {
			t.Errorf("vector %d %q:\n got %v\nwant %v", i, g.Text, ids, g.IDs)
		}
		if got := tok.Decode(g.IDs); got != g.Decoded || got != g.Text {
			t.Errorf("vector %d: Decode = %q, want %q", i, got, g.Text)
		}
	}
}
