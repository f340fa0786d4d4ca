package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ds4go/ds4/internal/fileio"
)

// maxFile bounds the tokenizer.json read (DeepSeek's is 7.8 MB).
const maxFile = 256 << 20

// Tokenizer is a loaded byte-level BPE tokenizer.
type Tokenizer struct {
	model     bpe
	tokens    []string // id -> token string ("" where unused)
	has       []bool
	added     []addedToken
	addedTrie [2]*trie // the added tokens by content; [1]: the normalized ones
	norm      normalizer
	pretok    []preStep
	byteLevel bool // the pre-tokenizer maps bytes to runes (ByteLevel)
	prefixSp  bool // ByteLevel add_prefix_space
	byteRegex bool // ByteLevel use_regex: GPT-2's split (gpt2Match)
}

type addedToken struct {
	id                      int64
	content                 string
	special, lstrip, rstrip bool
	normalized, singleWord  bool
}

// Load reads and parses a Hugging Face tokenizer.json.
func Load(path string) (*Tokenizer, error) {
	data, err := fileio.ReadFile(path, maxFile)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

type fileJSON struct {
	AddedTokens []struct {
		ID         *int64 `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		Lstrip     bool   `json:"lstrip"`
		Rstrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Decoder      json.RawMessage `json:"decoder"`
	Model        struct {
		Type         string           `json:"type"`
		Vocab        map[string]int64 `json:"vocab"`
		Merges       []any            `json:"merges"`
		ByteFallback bool             `json:"byte_fallback"`
		Prefix       *string          `json:"continuing_subword_prefix"`
		Suffix       *string          `json:"end_of_word_suffix"`
	} `json:"model"`
}

// Parse parses the contents of a tokenizer.json; name is used in errors.
func Parse(data []byte, name string) (*Tokenizer, error) {
	t, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return t, nil
}

func parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %v", err)
	}
	m := &f.Model
	if m.Type != "BPE" {
		return nil, fmt.Errorf("model type %q is not supported (only BPE)", m.Type)
	}
	if m.ByteFallback || (m.Prefix != nil && *m.Prefix != "") || (m.Suffix != nil && *m.Suffix != "") {
		return nil, fmt.Errorf("BPE byte_fallback, continuing_subword_prefix and end_of_word_suffix are not supported")
	}
	if len(m.Vocab) == 0 {
		return nil, fmt.Errorf("the model has no vocabulary")
	}
	t := &Tokenizer{model: bpe{vocab: m.Vocab, ranks: map[[2]int64]mergeRule{}}}
	if err := t.setVocab(); err != nil {
		return nil, err
	}
	if err := t.setMerges(m.Merges); err != nil {
		return nil, err
	}
	if err := t.setAdded(f); err != nil {
		return nil, err
	}
	var err error
	if t.norm, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if err := t.setPreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	return t, checkDecoder(f.Decoder)
}

func (t *Tokenizer) setVocab() error {
	byID := map[int64]string{}
	for tok, id := range t.model.vocab {
		if id < 0 || id > 1<<31 {
			return fmt.Errorf("vocabulary token %q has id %d, outside [0, 2^31]", tok, id)
		}
		if other, dup := byID[id]; dup {
			a, b := other, tok
			if b < a {
				a, b = b, a
			}
			return fmt.Errorf("vocabulary tokens %q and %q have the same id %d", a, b, id)
		}
		byID[id] = tok
	}
	for id, tok := range byID {
		t.setToken(id, tok)
	}
	return nil
}

func (t *Tokenizer) setToken(id int64, tok string) {
	for int64(len(t.tokens)) <= id {
		t.tokens = append(t.tokens, "")
		t.has = append(t.has, false)
	}
	t.tokens[id], t.has[id] = tok, true
}

func (t *Tokenizer) setMerges(merges []any) error {
	for i, raw := range merges {
		a, b, ok := parseMerge(raw)
		if !ok {
			return fmt.Errorf("merge %d is neither \"a b\" nor [\"a\", \"b\"]", i)
		}
		ia, okA := t.model.vocab[a]
		ib, okB := t.model.vocab[b]
		id, okAB := t.model.vocab[a+b]
		switch {
		case !okA:
			return fmt.Errorf("merge %d (%q %q) names %q, which is not in the vocabulary", i, a, b, a)
		case !okB:
			return fmt.Errorf("merge %d (%q %q) names %q, which is not in the vocabulary", i, a, b, b)
		case !okAB:
			return fmt.Errorf("merge %d (%q %q) makes %q, which is not in the vocabulary", i, a, b, a+b)
		}
		if _, dup := t.model.ranks[[2]int64{ia, ib}]; !dup {
			t.model.ranks[[2]int64{ia, ib}] = mergeRule{rank: i, id: id}
		}
	}
	return nil
}

func (t *Tokenizer) setAdded(f fileJSON) error {
	seen := map[int64]string{}
	for i, a := range f.AddedTokens {
		if a.ID == nil || *a.ID < 0 || *a.ID > 1<<31 {
			return fmt.Errorf("added token %d (%q) has no id in [0, 2^31]", i, a.Content)
		}
		id := *a.ID
		if a.Content == "" {
			return fmt.Errorf("added token %d (id %d) is empty", i, id)
		}
		if other, dup := seen[id]; dup {
			return fmt.Errorf("added tokens %q and %q have the same id %d", other, a.Content, id)
		}
		seen[id] = a.Content
		if v, ok := t.model.vocab[a.Content]; ok && v != id {
			return fmt.Errorf("added token %q has id %d but the vocabulary gives it id %d", a.Content, id, v)
		}
		if int64(len(t.tokens)) > id && t.has[id] && t.tokens[id] != a.Content {
			return fmt.Errorf("added token %q and vocabulary token %q have the same id %d", a.Content, t.tokens[id], id)
		}
		t.setToken(id, a.Content)
		t.added = append(t.added, addedToken{id: id, content: a.Content, special: a.Special,
			lstrip: a.Lstrip, rstrip: a.Rstrip, normalized: a.Normalized, singleWord: a.SingleWord})
	}
	for k := range t.addedTrie {
		t.addedTrie[k] = &trie{next: map[byte]*trie{}, token: -1}
	}
	for k, a := range t.added {
		t.addedTrie[boolIndex(a.normalized)].insert(a.content, k)
	}
	return nil
}

func checkDecoder(raw json.RawMessage) error {
	var d struct {
		Type string `json:"type"`
	}
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("no decoder (only ByteLevel is supported)")
	}
	if err := json.Unmarshal(raw, &d); err != nil || d.Type != "ByteLevel" {
		return fmt.Errorf("decoder %q is not supported (only ByteLevel)", d.Type)
	}
	return nil
}

// TokenString returns the raw vocabulary string of id (byte-level form).
func (t *Tokenizer) TokenString(id int64) (string, bool) {
	if id < 0 || id >= int64(len(t.tokens)) || !t.has[id] {
		return "", false
	}
	return t.tokens[id], true
}

// ID returns the id of a vocabulary or added token.
func (t *Tokenizer) ID(token string) (int64, bool) {
	if id, ok := t.model.vocab[token]; ok {
		return id, true
	}
	for _, a := range t.added {
		if a.content == token {
			return a.id, true
		}
	}
	return 0, false
}

// VocabSize is the largest id + 1 over the vocabulary and added tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Decode returns the text of ids, as Hugging Face's ByteLevel decoder does
// (special tokens decoded as their text, ids with no token skipped, bytes
// that are not UTF-8 replaced by U+FFFD).
func (t *Tokenizer) Decode(ids []int64) string {
	return string(appendLossy(nil, t.appendBytes(nil, ids...)))
}

func (t *Tokenizer) appendBytes(dst []byte, ids ...int64) []byte {
	for _, id := range ids {
		if tok, ok := t.TokenString(id); ok {
			dst = tokenBytes(dst, tok)
		}
	}
	return dst
}

// Encode returns the ids of text. Added and special tokens in text are
// matched before splitting; no BOS is added.
func (t *Tokenizer) Encode(text string) []int64 {
	var ids []int64
	for _, seg := range t.splitAdded(text, false) {
		if seg.id >= 0 {
			ids = append(ids, seg.id)
			continue
		}
		for _, seg2 := range t.splitAdded(t.norm(seg.text), true) {
			if seg2.id >= 0 {
				ids = append(ids, seg2.id)
				continue
			}
			ids = t.encodePlain(ids, seg2.text)
		}
	}
	return ids
}

// encodePlain pre-tokenizes and BPE-encodes text holding no added token.
func (t *Tokenizer) encodePlain(ids []int64, text string) []int64 {
	pieces := []string{text}
	for _, step := range t.pretok {
		pieces = step(pieces)
	}
	for _, p := range pieces {
		if p == "" {
			continue
		}
		if t.prefixSp && !strings.HasPrefix(p, " ") {
			p = " " + p
		}
		words := []string{p}
		if t.byteRegex {
			words = splitIsolated(words, gpt2Splitter)
		}
		for _, w := range words {
			if t.byteLevel {
				w = byteLevel(w)
			}
			ids = t.model.encodeWord(ids, w)
		}
	}
	return ids
}
