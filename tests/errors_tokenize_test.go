package tests

// The "tokenize" entries of docs/errors.md (cmd/tokenize), and the command's
// good runs: DeepSeek V3's real tokenizer against the golden vectors of
// tokenizer/testdata, and the Engram map of the tiny checkpoint's tokenizer.

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/tokenizer"
)

// tokJSON is a tokenizer.json with this model and these added tokens.
func tokJSON(model, added string) string {
	return `{"added_tokens":[` + added + `],"normalizer":null,` +
		`"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":false},` +
		`"decoder":{"type":"ByteLevel"},"model":` + model + `}`
}

// tokenizeWith is a tokenize case of a tokenizer.json written into in.
func tokenizeWith(text string, args ...string) func(t *testing.T, fx *errsFixture, in string) []string {
	return func(t *testing.T, fx *errsFixture, in string) []string {
		return append([]string{"-tokenizer", errsWrite(t, filepath.Join(in, "t.json"), text)}, args...)
	}
}

func init() {
	okModel := `{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}`
	errsCases = append(errsCases, []errsCase{
		{name: "tokenize-no-tokenizer", cmd: "tokenize", want: "-tokenizer is required", setup: func(t *testing.T, fx *errsFixture, in string) []string { return nil }},
		{name: "tokenize-tokenizer-missing", cmd: "tokenize", want: "nope.json: no such file or directory", setup: func(t *testing.T, fx *errsFixture, in string) []string {
			return []string{"-tokenizer", filepath.Join(in, "nope.json")}
		}},
		{name: "tokenizer-not-json", cmd: "tokenize", want: "t.json: not a tokenizer.json", setup: tokenizeWith("{")},
		{name: "tokenizer-model-type", cmd: "tokenize", want: `t.json: model type "WordPiece" is not supported (only BPE)`, setup: tokenizeWith(tokJSON(`{"type":"WordPiece","vocab":{"a":0}}`, ""))},
		{name: "tokenizer-merge-unknown", cmd: "tokenize", want: `t.json: merge 0 ("a" "b") names "b", which is not in the vocabulary`, setup: tokenizeWith(tokJSON(`{"type":"BPE","vocab":{"a":0,"ab":1},"merges":[["a","b"]]}`, ""))},
		{name: "tokenizer-duplicate-id", cmd: "tokenize", want: `t.json: vocabulary tokens "a" and "b" have the same id 0`, setup: tokenizeWith(tokJSON(`{"type":"BPE","vocab":{"a":0,"b":0},"merges":[]}`, ""))},
		{name: "tokenizer-added-duplicate-id", cmd: "tokenize", want: `t.json: added token "<x>" and vocabulary token "b" have the same id 1`, setup: tokenizeWith(tokJSON(okModel, `{"id":1,"content":"<x>"}`))},
		{name: "tokenizer-pre-tokenizer", cmd: "tokenize", want: `t.json: pre_tokenizer "Whitespace" is not supported`, setup: tokenizeWith(strings.Replace(tokJSON(okModel, ""), `{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}`, `{"type":"Whitespace"}`, 1))},
		{name: "tokenize-input-empty", cmd: "tokenize", want: "standard input: not a JSON array of strings: unexpected end of JSON input", setup: tokenizeWith(tokJSON(okModel, ""))},
		{name: "tokenize-decode-engram", cmd: "tokenize", want: "-decode has no effect with -engram-map (it reads no input)", setup: tokenizeWith(tokJSON(okModel, ""), "-engram-map", "-decode")},
	}...)
}

// tokenizeRun runs the built tokenize with stdin.
func tokenizeRun(t *testing.T, stdin string, args ...string) errsResult {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	cmd := exec.Command(filepath.Join(binDir, "tokenize"), args...)
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(stdin)
	return errsRunCmd(t, "tokenize", cmd)
}

// TestTokenizeStdinErrors: bad standard input gets one line, exit 2 (the
// catalogue's harness gives no standard input).
func TestTokenizeStdinErrors(t *testing.T) {
	tj := errsWrite(t, filepath.Join(t.TempDir(), "t.json"), tokJSON(`{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}`, ""))
	cases := []struct {
		name, stdin, want string
		args              []string
	}{
		{"tokenize-input-utf8", "[\"ab\xff\"]", "standard input: invalid UTF-8 at byte offset 4", nil},
		{"tokenize-input-not-strings", "[1, 2]", "standard input: not a JSON array of strings", nil},
		{"tokenize-input-null", "null", "standard input: not a JSON array of strings (got null)", nil},
		{"tokenize-decode-bad-id", "[[0, 1], [2, 7]]", "standard input: array 1, id 7 (index 1): no such token (the vocabulary has ids 0..2)", []string{"-decode"}},
		{"tokenize-decode-not-ids", `[["a"]]`, "standard input: not a JSON array of arrays of integer ids", []string{"-decode"}},
	}
	starred := errsDocEntries(errsDoc(t), true)
	have := map[string]bool{}
	for _, c := range cases {
		have[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			if !slices.Contains(starred, c.name) {
				t.Errorf("docs/errors.md has no entry `%s` *", c.name)
			}
			r := tokenizeRun(t, c.stdin, append([]string{"-tokenizer", tj}, c.args...)...)
			errsCheckOneLine(t, "tokenize", r, 2, c.want)
			if r.stdout != "" {
				t.Errorf("wrote %q to standard output", r.stdout)
			}
		})
	}
	for _, name := range starred {
		if !have[name] {
			t.Errorf("docs/errors.md entry `%s` * has no case here", name)
		}
	}
}

// TestTokenizeGolden: the command encodes the golden texts with DeepSeek
// V3's tokenizer id for id as Hugging Face does, and -decode gives them back.
func TestTokenizeGolden(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Open(filepath.Join(repoRoot(), "tokenizer", "testdata", "deepseek_v3_tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	tj := errsWrite(t, filepath.Join(dir, "tokenizer.json"), string(data))
	gdata, err := os.ReadFile(filepath.Join(repoRoot(), "tokenizer", "testdata", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden []struct {
		Text string  `json:"text"`
		IDs  []int64 `json:"ids"`
	}
	if err := json.Unmarshal(gdata, &golden); err != nil {
		t.Fatal(err)
	}
	var texts []string
	var ids [][]int64
	for _, g := range golden {
		texts = append(texts, g.Text)
		ids = append(ids, g.IDs)
	}
	in, _ := json.Marshal(texts)
	r := tokenizeRun(t, string(in), "-tokenizer", tj)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("tokenize: %d %s", r.code, r.stderr)
	}
	var got []struct {
		IDs     []int64 `json:"ids"`
		Decoded string  `json:"decoded"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != len(golden) {
		t.Fatalf("output: %v (%d of %d)", err, len(got), len(golden))
	}
	for i := range golden {
		if !slices.Equal(got[i].IDs, ids[i]) || got[i].Decoded != texts[i] {
			t.Errorf("text %d %q: ids %v decoded %q", i, texts[i], got[i].IDs, got[i].Decoded)
		}
	}
	in, _ = json.Marshal(ids)
	r = tokenizeRun(t, string(in), "-tokenizer", tj, "-decode")
	var dec []string
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &dec) != nil || !slices.Equal(dec, texts) {
		t.Errorf("-decode: %d %s; the texts do not come back", r.code, r.stderr)
	}
}

// TestTokenizeEngramMap: -engram-map writes the map deepseekv4 derives
// from the tiny checkpoint's tokenizer (checked against the reference in
// models/deepseekv4), count and lookup.
func TestTokenizeEngramMap(t *testing.T) {
	r := tokenizeRun(t, "", "-tokenizer", textTokenizer(), "-engram-map")
	var m struct {
		Count  int     `json:"count"`
		Lookup []int64 `json:"lookup"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil {
		t.Fatalf("tokenize -engram-map: %d %s", r.code, r.stderr)
	}
	tok, err := tokenizer.Load(textTokenizer())
	if err != nil {
		t.Fatal(err)
	}
	lookup, count := deepseekv4.EngramTokenMap(tok)
	if m.Count != count || !slices.Equal(m.Lookup, lookup) || len(lookup) != tok.VocabSize() {
		t.Errorf("count %d, want %d; %d lookups, want %d equal to EngramTokenMap's", m.Count, count, len(m.Lookup), len(lookup))
	}
}
