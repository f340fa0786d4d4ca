package kernels

import (
	"math"
	"slices"
	"sort"

	"github.com/ds4go/ds4/internal/numfmt"
)

// The lightning indexer (spec §4.7) and the candidate pre-filter (§4.8).
// Rows of the score matrix are (batch, query) pairs; columns are compressed
// positions.

// IndexScore computes the indexer scores (spec §4.7 step 4) with the bf16
// roundings of the reference (torch, default dtype bf16):
//
//	e[h]  = bf16(fp32(q[b,t,h,:] · k[b,j,:]))   einsum "bshd,btd->bsht"
//	r[h]  = bf16(relu(e[h]) · w[b,t,h])         relu_() then * weights (bf16 op)
//	out[b,t,j] = bf16(Σ_h r[h])                 .sum(dim=2) on bf16: fp32
//	                                            accumulation, heads in order,
//	                                            one rounding at the end
//
// q [b, s, h, di] (fp4-fake-quantised index queries, bf16 values),
// k [b, nc, di] (index keys of the first nc compressed positions, bf16
// values), w [b, s, h] (head weights = bf16(weights_proj·x)·scale, already
// scaled), out [b, s, nc]. The dot product is accumulated in float64 and
// rounded to fp32 before the bf16 rounding (fp4 × fp4 products make it exact
// in practice). relu maps negatives and −0 to +0 (NaN propagates).
func IndexScore(out []float32, q []float32, b, s, h, di int, k []float32, nc int, w []float32) {
	if len(out) < b*s*nc || len(q) < b*s*h*di || len(k) < b*nc*di || len(w) < b*s*h {
		panic("kernels.IndexScore: buffer too small")
	}
	// One work unit per (row, j) output; each is the sequential sum below.
	parallelRange(b*s*nc, 64, b*s*nc*h*di, func(u0, u1 int) {
		for u := u0; u < u1; u++ {
			row, j := u/nc, u%nc
			bi := row / s
			kv := k[(bi*nc+j)*di : (bi*nc+j+1)*di]
			var sum float32
			for hi := 0; hi < h; hi++ {
				qv := q[(row*h+hi)*di : (row*h+hi+1)*di]
				var dot float64
				for d, x := range qv {
					dot += float64(float64(x) * float64(kv[d]))
				}
				e := numfmt.BF16Round(float32(dot))
				if e <= 0 {
					e = 0
				}
				sum += numfmt.BF16Round(e * w[row*h+hi])
			}
			out[row*nc+j] = numfmt.BF16Round(sum)
		}
	})
}

// IndexCausalMask applies the indexer's causality (spec §4.7 step 5) to
// score [b, s, nc]: query t (position startPos+t) sees the first
// ⌊(startPos+t+1)/ratio⌋ compressed positions and every later column is set
// to -inf. In decode (one query, nc = ⌊(startPos+1)/ratio⌋) every column is
// visible and nothing changes.
func IndexCausalMask(score []float32, b, s, nc, startPos, ratio int) {
	if startPos != 0 && s == 1 {
		return
	}
	ninf := float32(math.Inf(-1))
	for bi := 0; bi < b; bi++ {
		for t := 0; t < s; t++ {
			row := score[(bi*s+t)*nc : (bi*s+t+1)*nc]
			for j := (startPos + t + 1) / ratio; j < nc; j++ {
				row[j] = ninf
			}
		}
	}
}

// IndexVisibleLens returns the per-query visible compressed counts the
// reference calls compress_lens: the s values ⌊(startPos+t+1)/ratio⌋ for
// t = 0..s−1 (shared by every batch row; a prefill has startPos 0, a chunk
// any), in decode (s = 1, startPos > 0) the single value (startPos+1) div
// ratio. Pass the result as `lens` to SelectCandidateBlocks and IndexTopK.
func IndexVisibleLens(s, startPos, ratio int) []int {
	if startPos != 0 && s == 1 {
		return []int{(startPos + s) / ratio}
	}
	lens := make([]int, s)
	for t := range lens {
		lens[t] = (startPos + t + 1) / ratio
	}
	return lens
}

// indexLen returns lens for row r: lens may have one entry per row, or a
// shorter length L that divides rows, in which case row r uses lens[r mod L]
// (torch broadcasting: a prefill vector [s] over the batch, or the single
// decode value).
func indexLen(lens []int, rows, r int) int {
	if len(lens) == 0 || rows%len(lens) != 0 {
		panic("kernels: lens length must divide the number of rows")
	}
	return lens[r%len(lens)]
}

// indexTopOrder returns the positions of the k largest values of v, ordered
// by value descending and, among equal values, by position ascending (the
// deterministic tie rule of this reference; torch.topk leaves ties
// implementation-defined). NaN is not expected.
func indexTopOrder(v []float32, k int, scratch []int) []int {
	ord := scratch[:len(v)]
	for i := range ord {
		ord[i] = i
	}
	slices.SortStableFunc(ord, func(a, b int) int {
		switch {
		case v[a] > v[b]:
			return -1
		case v[a] < v[b]:
			return 1
		}
		return 0
	})
	return ord[:k]
}

// indexTopSet returns the positions indexTopOrder(v, k, scratch) returns,
// in no particular order: the k best under (value descending, position
// ascending), kept in a heap whose root is the worst kept (n log k instead
// of sorting every position). A row with a NaN, which the stable sort's
// comparisons do not order, takes indexTopOrder itself.
func indexTopSet(v []float32, k int, scratch []int) []int {
	for _, x := range v {
		if x != x {
			return indexTopOrder(v, k, scratch)
		}
	}
	h := scratch[:0]
	if k == 0 {
		return h
	}
	worse := func(i, j int) bool { return v[i] < v[j] || (v[i] == v[j] && i > j) } // i ranks after j
	down := func(i int) {
		for {
			w, l, r := i, 2*i+1, 2*i+2
			if l < len(h) && worse(h[l], h[w]) {
				w = l
			}
			if r < len(h) && worse(h[r], h[w]) {
				w = r
			}
			if w == i {
				return
			}
			h[i], h[w] = h[w], h[i]
			i = w
		}
	}
	for i := range v {
		if len(h) < k {
			h = append(h, i)
			for c := len(h) - 1; c > 0 && worse(h[c], h[(c-1)/2]); c = (c - 1) / 2 {
				h[c], h[(c-1)/2] = h[(c-1)/2], h[c]
			}
			continue
		}
		if v[i] > v[h[0]] { // a later position ties no kept value: only a greater one ranks before
			h[0] = i
			down(0)
		}
	}
	return h
}

// SelectCandidateBlocks is select_candidate_blocks(logits, lens, topkBlocks,
// blockSize) of spec §4.8. logits [rows, wd] are index scores with the
// unreachable positions already -inf; mask [rows, wd] receives 1 for the
// positions of the kept blocks, 0 elsewhere.
//
// Per row with visible count n = lens[row] (see indexLen for broadcasting;
// in decode n is the single value (start_pos+1) div ratio, which equals wd):
// the row is padded with -inf to a multiple of blockSize, each block scores the
// max of its positions, the block ⌊(n−1)/blockSize⌋ (floor division; no block
// when n ≤ 0) is forced to +inf, the top min(topkBlocks, nBlocks) blocks are
// taken (ties: lower block first) and those whose score is -inf are dropped;
// the kept blocks are expanded back to positions and truncated to wd.
func SelectCandidateBlocks(mask []uint8, logits []float32, rows, wd int, lens []int, topkBlocks, blockSize int) {
	nb := (wd + blockSize - 1) / blockSize
	scores := make([]float32, nb)
	scratch := make([]int, nb)
	ninf := float32(math.Inf(-1))
	for r := 0; r < rows; r++ {
		lg := logits[r*wd : (r+1)*wd]
		for bk := range scores {
			m := ninf
			for _, v := range lg[bk*blockSize : min((bk+1)*blockSize, wd)] {
				m = max(m, v)
			}
			scores[bk] = m
		}
		if n := indexLen(lens, rows, r); n > 0 {
			scores[(n-1)/blockSize] = float32(math.Inf(1))
		}
		mk := mask[r*wd : (r+1)*wd]
		clear(mk)
		for _, bk := range indexTopSet(scores, min(topkBlocks, nb), scratch) { // (a set: the mask does not depend on the order)
			if scores[bk] == ninf {
				continue
			}
			for i := bk * blockSize; i < min((bk+1)*blockSize, wd); i++ {
				mk[i] = 1
			}
		}
	}
}

// ApplyCandidates sets score[i] = -inf wherever mask[i] == 0 (spec §4.7
// step 6, re-indexing layers restricted to the candidate source's blocks).
func ApplyCandidates(score []float32, mask []uint8) {
	ninf := float32(math.Inf(-1))
	for i, m := range mask {
		if m == 0 {
			score[i] = ninf
		}
	}
}

// IndexTopK selects the compressed positions each query attends to (spec §4.7
// step 7). score [rows, nc]; out [rows, k] (k = min(index_topk, nc)). Per row:
// the k highest scores are taken (ties, -inf included: lower position first),
// their positions sorted ascending, and each position p written as
// p + offset if p < lens[row] (the visible count; see indexLen for
// broadcasting), else -1. Because unreachable positions are the highest
// ones, the -1 entries end up at the end of the row.
func IndexTopK(out []int32, score []float32, rows, nc, k int, lens []int, offset int) {
	if k > nc {
		panic("kernels.IndexTopK: k > nc")
	}
	// rows are independent: spread over the cores
	parallelRange(rows, 1, rows*nc*8, func(r0, r1 int) {
		scratch := make([]int, nc)
		for r := r0; r < r1; r++ {
			sel := indexTopSet(score[r*nc:(r+1)*nc], k, scratch)
			sort.Ints(sel)
			n := indexLen(lens, rows, r)
			o := out[r*k : (r+1)*k]
			for i, p := range sel {
				if p < n {
					o[i] = int32(p + offset)
				} else {
					o[i] = -1
				}
			}
		}
	})
}
