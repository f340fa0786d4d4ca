package deepseekv4

import (
	"regexp"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/ds4go/ds4/tokenizer"
)

// EngramTokenMap derives the Engram compressed token map from a tokenizer,
// as the reference's build_compressed_token_map does (engram.py; spec
// §4.11): every id 0..VocabSize-1 is decoded alone; a text holding U+FFFD
// (a partial UTF-8 sequence) is keyed by the raw token string, any other by
// its normalised form (or the text itself when that is empty); compressed
// ids are given in order of first appearance. count is the number of keys,
// which a checkpoint's engram_compressed_vocab_size must equal.
func EngramTokenMap(tok *tokenizer.Tokenizer) (lookup []int64, count int) {
	n := tok.VocabSize()
	lookup = make([]int64, n)
	ids := map[string]int64{}
	for id := range n {
		key := engramKey(tok, int64(id))
		c, ok := ids[key]
		if !ok {
			c = int64(len(ids))
			ids[key] = c
		}
		lookup[id] = c
	}
	return lookup, len(ids)
}

func engramKey(tok *tokenizer.Tokenizer, id int64) string {
	text := tok.Decode([]int64{id})
	if strings.ContainsRune(text, utf8Replacement) {
		raw, _ := tok.TokenString(id)
		return raw
	}
	if k := engramNormalize(text); k != "" {
		return k
	}
	return text
}

const utf8Replacement = '\uFFFD'

// engramBlank is the reference's Replace(/[ \t\r\n]+/ → " ").
var engramBlank = regexp.MustCompile(`[ \t\r\n]+`)

// engramNormalize is the reference's Hugging Face normaliser sequence
// NFKC → NFD → StripAccents → Lowercase → Replace(/[ \t\r\n]+/ → " ") →
// Replace(/^ $/ → U+E000) → Strip → Replace(U+E000 → " "): a text that
// collapses to one space keeps it, any other loses its outer whitespace.
func engramNormalize(s string) string {
	s = norm.NFD.String(norm.NFKC.String(s))
	// StripAccents drops every combining mark (General_Category M, as the
	// unicode-normalization crate's is_combining_mark), Lowercase maps each
	// character on its own (no context, so no final sigma).
	s = strings.Map(func(r rune) rune {
		if unicode.Is(unicode.M, r) {
			return -1
		}
		return unicode.ToLower(r)
	}, s)
	s = engramBlank.ReplaceAllString(s, " ")
	if s == " " {
		return s
	}
	// Strip removes White_Space (Rust's char::is_whitespace), which is
	// unicode.IsSpace.
	return strings.TrimFunc(s, unicode.IsSpace)
}
