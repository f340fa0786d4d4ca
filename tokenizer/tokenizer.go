package tokenizer

import (
	"fmt"
	"os"
)

// Tokenizer is a loaded byte-level BPE tokenizer.
type Tokenizer struct {
	name   string
	vocab  map[string]int64
	tokens []string // id -> raw vocabulary string ("" where unused)
	has    []bool
}

// Load reads and parses a Hugging Face tokenizer.json.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse parses the contents of a tokenizer.json; name is used in errors.
func Parse(data []byte, name string) (*Tokenizer, error) {
	return nil, fmt.Errorf("%s: not implemented yet", name)
}

// Encode returns the ids of text. Added and special tokens in text are
// matched before splitting; no BOS is added.
func (t *Tokenizer) Encode(text string) []int64 { return nil }

// Decode returns the text of ids (special tokens decoded as their text).
func (t *Tokenizer) Decode(ids []int64) string { return "" }

// TokenString returns the raw vocabulary string of id (byte-level form).
func (t *Tokenizer) TokenString(id int64) (string, bool) {
	if id < 0 || id >= int64(len(t.tokens)) || !t.has[id] {
		return "", false
	}
	return t.tokens[id], true
}

// ID returns the id of a vocabulary or added token.
func (t *Tokenizer) ID(token string) (int64, bool) {
	id, ok := t.vocab[token]
	return id, ok
}

// VocabSize is the largest id + 1 over the vocabulary and added tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// StreamDecoder turns ids into text as they come.
type StreamDecoder struct {
	t     *Tokenizer
	stops []string
}

// NewStreamDecoder returns a decoder that stops at any of stops.
func (t *Tokenizer) NewStreamDecoder(stops []string) *StreamDecoder {
	return &StreamDecoder{t: t, stops: stops}
}

// Add decodes one more id. It emits only complete UTF-8 and holds back text
// that could begin a stop string; stopped is true once a stop string is
// complete (text excludes it).
func (d *StreamDecoder) Add(id int64) (text string, stopped bool) { return "", false }

// Flush returns the text held back.
func (d *StreamDecoder) Flush() string { return "" }
