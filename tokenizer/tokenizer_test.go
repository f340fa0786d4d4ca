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

// deepseekJSON is DeepSeek V3's real tokenizer.json (testdata/README.md).
func deepseekJSON(t testing.TB) []byte {
	t.Helper()
	data, err := deepseekData()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var deepseekData = sync.OnceValues(func() ([]byte, error) {
	f, err := os.Open("testdata/deepseek_v3_tokenizer.json.gz")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(z)
})

var deepseek = sync.OnceValues(func() (*Tokenizer, error) {
	data, err := deepseekData()
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

// TestGoldenByteLevelRegex: DeepSeek's vocabulary behind GPT-2's ByteLevel
// pre-tokenizer (use_regex, add_prefix_space) matches Hugging Face too
// (mkgolden.mjs ... bytelevel); the decodes keep the added prefix space.
func TestGoldenByteLevelRegex(t *testing.T) {
	var f map[string]any
	data, err := os.ReadFile("testdata/golden_bytelevel.json")
	if err != nil {
		t.Fatal(err)
	}
	var gs []golden
	if err := json.Unmarshal(data, &gs); err != nil {
		t.Fatal(err)
	}
	raw := deepseekJSON(t)
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	f["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}
	raw, _ = json.Marshal(f)
	tok, err := Parse(raw, "bytelevel.json")
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range gs {
		if ids := tok.Encode(g.Text); !slices.Equal(ids, g.IDs) {
			t.Errorf("vector %d %q:\n got %v\nwant %v", i, g.Text, ids, g.IDs)
		}
		if got := tok.Decode(g.IDs); got != g.Decoded {
			t.Errorf("vector %d: Decode = %q, want %q", i, got, g.Decoded)
		}
	}
}
