package tokenizer

import (
	"strings"
	"sync"
)

// bpe is a byte-level BPE model: merges ranked by their order in the file.
type bpe struct {
	vocab map[string]int64
	ranks map[[2]int64]mergeRule
	cache sync.Map // word (byte-level form) -> []int64
}

type mergeRule struct {
	rank int
	id   int64
}

// maxCached bounds the length of the words the cache keeps, so that a long
// unbroken input does not fill memory.
const maxCached = 256

// encodeWord appends the ids of one pre-tokenized word (byte-level form).
func (m *bpe) encodeWord(dst []int64, word string) []int64 {
	if v, ok := m.cache.Load(word); ok {
		return append(dst, v.([]int64)...)
	}
	ids := m.merge(word)
	if len(word) <= maxCached {
		m.cache.Store(word, ids)
	}
	return append(dst, ids...)
}

// merge applies the merges to the runes of word, always the lowest-ranked
// adjacent pair first and the leftmost of equal ranks, as Hugging Face's
// priority queue does.
func (m *bpe) merge(word string) []int64 {
	var syms []int64
	for _, r := range word {
		id, ok := m.vocab[string(r)]
		if !ok {
			continue // no unknown token: byte-level vocabularies cover every byte
		}
		syms = append(syms, id)
	}
	for len(syms) > 1 {
		best, at := mergeRule{rank: -1}, -1
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := m.ranks[[2]int64{syms[i], syms[i+1]}]; ok && (at < 0 || r.rank < best.rank) {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = best.id
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return syms
}

// parseMerge reads one merge in either encoding: "a b" or ["a", "b"].
func parseMerge(raw any) (a, b string, ok bool) {
	switch v := raw.(type) {
	case string:
		a, b, ok = strings.Cut(v, " ")
		return a, b, ok && !strings.Contains(b, " ")
	case []any:
		if len(v) != 2 {
			return "", "", false
		}
		a, ok1 := v[0].(string)
		b, ok2 := v[1].(string)
		return a, b, ok1 && ok2
	}
	return "", "", false
}
