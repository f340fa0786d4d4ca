package tokenizer

import (
	"container/heap"
	"strings"
	"sync"
)

// bpe is a byte-level BPE model: merges ranked by their order in the file.
type bpe struct {
	vocab map[string]int64
	ranks map[[2]int64]mergeRule

	mu    sync.Mutex
	cache map[string][]int64 // word (byte-level form) -> ids
}

type mergeRule struct {
	rank int
	id   int64
}

// The cache keeps words up to maxCachedLen bytes and is emptied when it
// holds maxCached of them, so that no input makes it grow without bound.
const (
	maxCachedLen = 256
	maxCached    = 1 << 16
)

// encodeWord appends the ids of one pre-tokenized word (byte-level form).
func (m *bpe) encodeWord(dst []int64, word string) []int64 {
	m.mu.Lock()
	ids, ok := m.cache[word]
	m.mu.Unlock()
	if ok {
		return append(dst, ids...)
	}
	ids = m.merge(word)
	if len(word) <= maxCachedLen {
		m.mu.Lock()
		if m.cache == nil || len(m.cache) >= maxCached {
			m.cache = map[string][]int64{}
		}
		m.cache[word] = ids
		m.mu.Unlock()
	}
	return append(dst, ids...)
}

// merge applies the merges to the runes of word, always the lowest-ranked
// adjacent pair first and the leftmost of equal ranks, as Hugging Face's
// priority queue does; O(n log n) in the word's length.
func (m *bpe) merge(word string) []int64 {
	var ids []int64
	for _, r := range word {
		if id, ok := m.vocab[string(r)]; ok {
			ids = append(ids, id) // byte-level vocabularies cover every byte
		}
	}
	n := len(ids)
	next, prev := make([]int, n), make([]int, n)
	for i := range n {
		next[i], prev[i] = i+1, i-1
	}
	h := &pairHeap{}
	push := func(i int) {
		if i < 0 || next[i] >= n {
			return
		}
		if r, ok := m.ranks[[2]int64{ids[i], ids[next[i]]}]; ok {
			heap.Push(h, pair{rank: r.rank, pos: i, left: ids[i], right: ids[next[i]], id: r.id})
		}
	}
	for i := range n {
		push(i)
	}
	for h.Len() > 0 {
		p := heap.Pop(h).(pair)
		j := next[p.pos]
		if ids[p.pos] != p.left || j >= n || ids[j] != p.right {
			continue // stale: a neighbour merged since
		}
		ids[p.pos] = p.id
		ids[j] = -1
		next[p.pos] = next[j]
		if next[j] < n {
			prev[next[j]] = p.pos
		}
		push(prev[p.pos])
		push(p.pos)
	}
	out := ids[:0]
	for i := 0; i < n; i = next[i] {
		out = append(out, ids[i])
	}
	return out
}

type pair struct {
	rank, pos       int
	left, right, id int64
}

type pairHeap []pair

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pair)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
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
