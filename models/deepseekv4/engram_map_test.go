package deepseekv4

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ds4go/ds4/tokenizer"
)

// refMap reads a reference map of testdata/engram_map (README.md there):
// count and the ids whose key repeats; the other ids take new ids in order.
func refMap(t *testing.T, name string, n int) ([]int64, int) {
	t.Helper()
	var ref struct {
		Count   int        `json:"count"`
		Repeats [][2]int64 `json:"repeats"`
	}
	unmarshal(t, gunzip(t, filepath.Join("testdata", "engram_map", name)), &ref)
	lookup := make([]int64, n)
	next, r := int64(0), 0
	for id := range lookup {
		if r < len(ref.Repeats) && ref.Repeats[r][0] == int64(id) {
			lookup[id] = ref.Repeats[r][1]
			r++
			continue
		}
		lookup[id] = next
		next++
	}
	if r != len(ref.Repeats) || next != int64(ref.Count) {
		t.Fatalf("%s: %d of %d repeats used, %d new ids for count %d", name, r, len(ref.Repeats), next, ref.Count)
	}
	return lookup, ref.Count
}

func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func unmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func compareMaps(t *testing.T, got []int64, gotCount int, want []int64, wantCount int) {
	t.Helper()
	if len(got) != len(want) || gotCount != wantCount {
		t.Fatalf("%d ids, count %d; the reference has %d ids, count %d", len(got), gotCount, len(want), wantCount)
	}
	bad := 0
	for id := range got {
		if got[id] != want[id] {
			if bad < 10 {
				t.Errorf("id %d: compressed id %d, the reference %d", id, got[id], want[id])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d ids differ from the reference", bad, len(got))
	}
}

// The compressed map of DeepSeek V3's real tokenizer, id for id against the
// reference's build_compressed_token_map run with Hugging Face tokenizers.
func TestEngramTokenMapDeepSeekV3(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the 128 815-token tokenizer")
	}
	tok, err := tokenizer.Parse(gunzip(t, filepath.Join("..", "..", "tokenizer", "testdata", "deepseek_v3_tokenizer.json.gz")), "deepseek_v3")
	if err != nil {
		t.Fatal(err)
	}
	lookup, count := EngramTokenMap(tok)
	want, wantCount := refMap(t, "v3_map.json.gz", tok.VocabSize())
	compareMaps(t, lookup, count, want, wantCount)
	// Hand-derived keys: "!" (id 3) is new after the 3 specials; " the"
	// and "the" normalise to different keys (the leading space is
	// stripped only from the outside: "ġthe" decodes to " the" → "the").
	if lookup[3] != 3 {
		t.Errorf("id 3 (\"!\") has compressed id %d, want 3", lookup[3])
	}
	the, _ := tok.ID("the")
	spThe, _ := tok.ID("Ġthe")
	upThe, _ := tok.ID("ĠThe")
	if lookup[spThe] != lookup[the] || lookup[upThe] != lookup[the] {
		t.Errorf("\"the\", \" the\", \" The\" map to %d, %d, %d; want one key", lookup[the], lookup[spThe], lookup[upThe])
	}
}

func TestEngramTokenMapTiny(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join("..", "..", "testdata", "tiny", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	lookup, count := EngramTokenMap(tok)
	want, wantCount := refMap(t, "tiny_map.json.gz", tok.VocabSize())
	compareMaps(t, lookup, count, want, wantCount)
}

// The normaliser on strings chosen to tell the steps apart (marks of every
// kind, compatibility forms, case without context, Unicode whitespace),
// against the reference's Hugging Face normaliser sequence.
func TestEngramNormalizeReference(t *testing.T) {
	var in, want []string
	for name, v := range map[string]*[]string{"normalize_in.json": &in, "normalize_out.json": &want} {
		b, err := os.ReadFile(filepath.Join("testdata", "engram_map", name))
		if err != nil {
			t.Fatal(err)
		}
		unmarshal(t, b, v)
	}
	if len(in) != len(want) || len(in) < 60 {
		t.Fatalf("%d inputs, %d outputs", len(in), len(want))
	}
	for i, s := range in {
		if got := engramNormalize(s); got != want[i] {
			t.Errorf("normalize(%q) = %q, the reference %q", s, got, want[i])
		}
	}
}
