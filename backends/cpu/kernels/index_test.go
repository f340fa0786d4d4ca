package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

func TestSelectCandidateBlocksOps(t *testing.T) {
	_, ops, _ := attentionTestFiles(t)
	const wd, topkBlocks, blockSize = 23, 3, 4
	// prefill: logits [2, 7, 23], lens [7] broadcast over the batch.
	logits := attentionTestF32(t, ops, "select_candidate_blocks.prefill.logits")
	lens64 := attentionTestI64(t, ops, "select_candidate_blocks.prefill.compress_lens")
	lens := make([]int, len(lens64))
	for i, v := range lens64 {
		lens[i] = int(v)
	}
	want := attentionTestRaw(t, ops, "select_candidate_blocks.prefill.mask")
	got := make([]uint8, len(want))
	SelectCandidateBlocks(got, logits, 14, wd, lens, topkBlocks, blockSize)
	if !slices.Equal(got, want) {
		t.Errorf("prefill mask:\n got %v\nwant %v", got, want)
	}
	// decode: one query per batch row, lens = the single value (start_pos+1) div r = 23 (ops.json).
	logits = attentionTestF32(t, ops, "select_candidate_blocks.decode.logits")
	want = attentionTestRaw(t, ops, "select_candidate_blocks.decode.mask")
	got = make([]uint8, len(want))
	SelectCandidateBlocks(got, logits, 2, wd, []int{23}, topkBlocks, blockSize)
	if !slices.Equal(got, want) {
		t.Errorf("decode mask:\n got %v\nwant %v", got, want)
	}
}

func TestSelectCandidateBlocksEdge(t *testing.T) {
	ninf := float32(math.Inf(-1))
	// n = 0: nothing reachable, nothing pinned, every block -inf -> empty mask.
	mask := make([]uint8, 5)
	SelectCandidateBlocks(mask, []float32{ninf, ninf, ninf, ninf, ninf}, 1, 5, []int{0}, 2, 2)
	if !slices.Equal(mask, []uint8{0, 0, 0, 0, 0}) {
		t.Errorf("n=0: %v", mask)
	}
	// n = 5, block 2: block 2 (position 4, partial) pinned; best other block kept.
	SelectCandidateBlocks(mask, []float32{1, 0, 3, 0, -5}, 1, 5, []int{5}, 2, 2)
	if !slices.Equal(mask, []uint8{0, 0, 1, 1, 1}) {
		t.Errorf("n=5: %v", mask)
	}
	// ties between blocks: the lower block wins.
	SelectCandidateBlocks(mask, []float32{2, 0, 2, 0, -5}, 1, 5, []int{5}, 2, 2)
	if !slices.Equal(mask, []uint8{1, 1, 0, 0, 1}) {
		t.Errorf("tie: %v", mask)
	}
}

func TestIndexTopKSmall(t *testing.T) {
	ninf := float32(math.Inf(-1))
	score := []float32{
		1, 5, 3, 5, ninf, ninf, // row 0: n = 4
		0, 0, 0, 0, 0, 0, // row 1: all tied, n = 6
	}
	out := make([]int32, 2*3)
	IndexTopK(out, score, 2, 6, 3, []int{4, 6}, 10)
	if want := []int32{11, 12, 13, 10, 11, 12}; !slices.Equal(out, want) {
		// row 0: top 3 = {1, 3, 2} -> sorted 1 2 3 -> +10
		t.Errorf("topk = %v, want %v", out, want)
	}
	score = []float32{2, ninf, ninf, ninf}
	out = make([]int32, 3)
	IndexTopK(out, score, 1, 4, 3, []int{1}, 0)
	if want := []int32{0, -1, -1}; !slices.Equal(out, want) {
		t.Errorf("topk = %v, want %v", out, want)
	}
}

func TestIndexScoreSmall(t *testing.T) {
	// one query, 2 heads, di 2, 2 positions.
	q := []float32{1, 1, 2, -1}
	k := []float32{1, 0.5, -1, 3}
	w := []float32{0.25, 3}
	out := make([]float32, 2)
	IndexScore(out, q, 1, 1, 2, 2, k, 2, w)
	// pos 0: head0 dot 1.5 -> 0.375; head1 dot 1.5 -> 4.5; sum 4.875
	// pos 1: head0 dot 2 -> 0.5; head1 dot -5 -> relu 0; sum 0.5
	if want := []float32{4.875, 0.5}; !slices.Equal(out, want) {
		t.Errorf("score = %v, want %v", out, want)
	}
	IndexCausalMask(out, 1, 1, 2, 0, 2) // t = 0, r = 2: nothing visible
	if !math.IsInf(float64(out[0]), -1) || !math.IsInf(float64(out[1]), -1) {
		t.Errorf("mask = %v", out)
	}
	if got := IndexVisibleLens(5, 0, 2); !slices.Equal(got, []int{0, 1, 1, 2, 2}) {
		t.Errorf("lens prefill = %v", got)
	}
	if got := IndexVisibleLens(1, 30, 2); !slices.Equal(got, []int{15}) {
		t.Errorf("lens decode = %v", got)
	}
}

// TestIndexTopSetIsTopOrder: the heap selection gives the set of the
// stable sort's first k positions on rows with ties, infinities, signed
// zeros and NaNs, for every k.
func TestIndexTopSetIsTopOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 2.5, float32(math.Inf(1)), float32(math.Inf(-1))}
	for trial := range 400 {
		n := 1 + r.IntN(40)
		v := make([]float32, n)
		for i := range v {
			if r.IntN(2) == 0 {
				v[i] = vals[r.IntN(len(vals))]
			} else {
				v[i] = float32(r.NormFloat64())
			}
		}
		if trial%10 == 0 {
			v[r.IntN(n)] = float32(math.NaN())
		}
		for k := 0; k <= n; k++ {
			want := slices.Clone(indexTopOrder(v, k, make([]int, n)))
			got := slices.Clone(indexTopSet(v, k, make([]int, n)))
			sort.Ints(want)
			sort.Ints(got)
			if !slices.Equal(got, want) {
				t.Fatalf("row %v k %d: %v, want %v", v, k, got, want)
			}
		}
	}
}
