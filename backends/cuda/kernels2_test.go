package cuda

// GPU tests of the indexer, compressor, Engram and plain-product kernels
// against the reference (same conventions as kernels_test.go).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/internal/numfmt"
)

func TestMatmulPlainGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	gemvModes(t, e, func(check checker) {
		// fp32 weights unrounded (the ratio-2 compressor), bf16 weights rounded
		// (MatmulBF16), bf16 weights unrounded (the head); up to 8 rows take
		// the decode kernels (gemv.cuh), more the tiled one
		for _, c := range []struct {
			m, k, n     int
			bf16, round bool
		}{
			{3, 5120, 4096, false, false}, {9, 1000, 300, true, true}, {12, 5120, 8192, true, false},
			{1, 5120, 129280, true, false}, // the head
			{3, 5120, 8192, true, false}, {8, 1000, 300, true, true}, {2, 1001, 33, true, true},
			{1, 5120, 4096, false, false}, {3, 1003, 70, false, true}, {8, 64, 5, false, false},
			// prefill rows of a bf16 op: bf16 tensor cores (gemm_bf16.cuh)
			// unless exact; edges of every tile dimension and K
			{300, 1000, 300, true, true}, {256, 5120, 1024, true, true}, {129, 1001, 33, true, true}, {9, 1000, 300, true, true},
		} {
			a := bf16s(r, c.m*c.k, 1)
			w := bf16s(r, c.n*c.k, 0.02)
			if !c.bf16 {
				for i := range w {
					w[i] = float32(r.NormFloat64() * 0.02) // full fp32 weights
				}
			}
			want := make([]float32, c.m*c.n)
			if c.round {
				kernels.MatmulBF16(want, a, w, c.m, c.k, c.n)
			} else {
				kernels.MatmulF32(want, a, w, c.m, c.k, c.n)
			}
			pw := Plain{Format: PlainF32}
			if c.bf16 {
				pw.Format = PlainBF16
				bits := make([]uint16, len(w))
				for i, v := range w {
					bits[i] = numfmt.BF16Bits(v)
				}
				pw.W = up(t, e, bits)
			} else {
				pw.W = up(t, e, w)
			}
			out := alloc(t, e, 4*len(want))
			if err := e.k.MatmulF32(e.s, "plain", out, up(t, e, a), c.m, c.k, pw, c.n, c.round); err != nil {
				t.Fatal(err)
			}
			check(t, fmt.Sprintf("matmul plain %dx%dx%d bf16 weights %v round %v", c.m, c.k, c.n, c.bf16, c.round), down[float32](t, e, out, len(want)), want)
		}
	})
}

func TestGroupedLoRAGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	// the released wo_a: 8 groups of 64·512/8 = 4096 inputs, rank 1024
	const m, groups, dg, rank = 3, 8, 4096, 1024
	o, woA := bf16s(r, m*groups*dg, 1), bf16s(r, groups*rank*dg, 0.02)
	want := make([]float32, m*groups*rank)
	kernels.GroupedLoRA(want, o, m, groups, dg, woA, rank)
	bits := make([]uint16, len(woA))
	for i, v := range woA {
		bits[i] = numfmt.BF16Bits(v)
	}
	out := alloc(t, e, 4*len(want))
	do := up(t, e, o)
	if err := e.k.GroupedLoRA(e.s, "wo_a", out, do, m, groups, dg, Plain{W: up(t, e, bits), Format: PlainBF16}, rank, true); err != nil {
		t.Fatal(err)
	}
	// the fast kernels (gemv_warp) sum along K in another order: the
	// reordered tolerance
	judge := golden
	if !e.k.Exact {
		judge = reordered
	}
	judge(t, "grouped lora", down[float32](t, e, out, len(want)), want)

	// the fp8 wo_a as stored, widened to bf16(e4m3·e8m0) as the cpu backend does
	codes, scales := e4m3Codes(r, groups*rank*dg), e8m0s(r, (groups*rank/32)*(dg/32))
	kb := dg / 32
	wide := make([]float32, len(codes))
	for row := range groups * rank {
		for c := range dg {
			wide[row*dg+c] = numfmt.BF16Round(numfmt.E4M3ToF32(codes[row*dg+c]) * numfmt.E8M0ToF32(scales[(row/32)*kb+c/32]))
		}
	}
	kernels.GroupedLoRA(want, o, m, groups, dg, wide, rank)
	out8 := alloc(t, e, 4*len(want))
	if err := e.k.GroupedLoRA(e.s, "wo_a fp8", out8, do, m, groups, dg, Plain{W: up(t, e, codes), Scale: up(t, e, scales), Format: PlainFP8}, rank, true); err != nil {
		t.Fatal(err)
	}
	judge(t, "grouped lora, fp8 weights", down[float32](t, e, out8, len(want)), want)

	// prefill rows: bf16 tensor cores unless exact (the fp8 weights widened
	// in the loader), a released-width group and odd sizes
	gemvModes(t, e, func(check checker) {
		for _, c := range []struct{ m, groups, dg, rank int }{{256, 8, 4096, 128}, {150, 3, 1000, 70}} {
			o := bf16s(r, c.m*c.groups*c.dg, 1)
			codes, scales := e4m3Codes(r, c.groups*c.rank*c.dg), e8m0s(r, ceilDiv(c.groups*c.rank, 32)*ceilDiv(c.dg, 32))
			codes[1] = 0x7f // a NaN code
			kb := ceilDiv(c.dg, 32)
			wide := make([]float32, len(codes))
			bits := make([]uint16, len(codes))
			for row := range c.groups * c.rank {
				for col := range c.dg {
					wide[row*c.dg+col] = numfmt.BF16Round(numfmt.E4M3ToF32(codes[row*c.dg+col]) * numfmt.E8M0ToF32(scales[(row/32)*kb+col/32]))
				}
			}
			for i, v := range wide {
				bits[i] = numfmt.BF16Bits(v)
			}
			want := make([]float32, c.m*c.groups*c.rank)
			kernels.GroupedLoRA(want, o, c.m, c.groups, c.dg, wide, c.rank)
			do := up(t, e, o)
			for _, w := range []Plain{{W: up(t, e, codes), Scale: up(t, e, scales), Format: PlainFP8}, {W: up(t, e, bits), Format: PlainBF16}} {
				out := alloc(t, e, 4*len(want))
				if err := e.k.GroupedLoRA(e.s, "wo_a", out, do, c.m, c.groups, c.dg, w, c.rank, true); err != nil {
					t.Fatal(err)
				}
				check(t, fmt.Sprintf("grouped %d×%d groups×%d→%d format %d", c.m, c.groups, c.dg, c.rank, w.Format), down[float32](t, e, out, len(want)), want)
			}
		}
	})
}

func TestIndexerGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	// index_n_heads 32, index_head_dim 128; prefill of 9 queries, ratio 2
	const b, s, h, di, nc, ratio = 1, 9, 32, 128, 900, 2
	q, k := bf16s(r, b*s*h*di, 1), bf16s(r, b*nc*di, 1)
	w := bf16s(r, b*s*h, 0.1)
	want := make([]float32, b*s*nc)
	kernels.IndexScore(want, q, b, s, h, di, k, nc, w)
	kernels.IndexCausalMask(want, b, s, nc, 0, ratio)
	score := alloc(t, e, 4*len(want))
	if err := e.k.IndexScore(e.s, "index", score, up(t, e, q), b, s, h, di, up(t, e, k), nc, up(t, e, w)); err != nil {
		t.Fatal(err)
	}
	if err := e.k.IndexCausalMask(e.s, "index", score, b, s, nc, 0, ratio); err != nil {
		t.Fatal(err)
	}
	exact(t, "index score + causal mask", down[float32](t, e, score, len(want)), want)
}

// tiedScores returns scores on a coarse grid (many ties) with -inf runs.
func tiedScores(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.IntN(64)) / 8
		if (i/50)%7 == 3 {
			v[i] = float32(math.Inf(-1))
		}
	}
	return v
}

func TestIndexTopKGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	const rows, nc, k, offset = 5, 3000, 512, 128
	score := tiedScores(r, rows*nc)
	lens := make([]int, rows)
	lens32 := make([]int32, rows)
	for i := range lens {
		lens[i] = r.IntN(nc + 1)
		lens32[i] = int32(lens[i])
	}
	want := make([]int32, rows*k)
	kernels.IndexTopK(want, score, rows, nc, k, lens, offset)
	out := alloc(t, e, 4*len(want))
	if err := e.k.IndexTopK(e.s, "topk", out, up(t, e, score), rows, nc, k, up(t, e, lens32), rows, offset); err != nil {
		t.Fatal(err)
	}
	got := down[int32](t, e, out, len(want))
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("index top-k entry %d (row %d): got %d, want %d", i, i/k, got[i], want[i])
		}
	}
	t.Logf("index top-k: %d entries equal", len(want))
}

func TestCandidateBlocksGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	// candidate_block_size 8, candidate_topk_blocks 2048 over 20000 positions
	const rows, wd, topk, bs = 4, 20000, 2048, 8
	logits := tiedScores(r, rows*wd)
	lens := []int{r.IntN(wd) + 1}
	want := make([]uint8, rows*wd)
	kernels.SelectCandidateBlocks(want, logits, rows, wd, lens, topk, bs)
	wantScore := append([]float32(nil), logits...)
	kernels.ApplyCandidates(wantScore, want)
	dl := up(t, e, logits)
	mask := alloc(t, e, len(want))
	if err := e.k.SelectCandidateBlocks(e.s, "cand", mask, dl, rows, wd, up(t, e, []int32{int32(lens[0])}), 1, topk, bs); err != nil {
		t.Fatal(err)
	}
	if err := e.k.ApplyCandidates(e.s, "cand", dl, mask, rows*wd); err != nil {
		t.Fatal(err)
	}
	got := down[uint8](t, e, mask, len(want))
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("candidate mask %d: got %d, want %d", i, got[i], want[i])
		}
	}
	exact(t, "candidates applied", down[float32](t, e, dl, len(wantScore)), wantScore)
}

func TestCompressorPoolGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	const b, d, ratio, s = 2, 512, 2, 7
	kvState, scoreState := make([]float32, b*ratio*d), make([]float32, b*ratio*d)
	for i := range scoreState {
		scoreState[i] = float32(math.Inf(-1))
	}
	dkv, dsc := up(t, e, kvState), up(t, e, scoreState)
	// prefill stores its tail in the state; a decode step pools from the
	// state as group_state_update left it (here: the previous steps' tokens,
	// written by GroupStateChunk after each) and writes no state
	step := func(name string, s, startPos int) {
		c, z := bf16s(r, b*s*d, 1), bf16s(r, b*s*d, 2)
		want := make([]float32, b*max(s/ratio, 1)*d)
		var wantG int
		if startPos == 0 {
			wantG = kernels.CompressorPool(want, c, z, b, s, d, ratio, kvState, scoreState, startPos)
		} else {
			wantG = kernels.CompressorPoolChunk(want, c, z, b, s, d, ratio, kvState, scoreState, startPos)
		}
		out := alloc(t, e, 4*len(want))
		g, err := e.k.CompressorPool(e.s, name, out, up(t, e, c), up(t, e, z), b, s, d, ratio, dkv, dsc, startPos)
		if err != nil {
			t.Fatal(err)
		}
		if g != wantG {
			t.Fatalf("%s: %d groups, want %d", name, g, wantG)
		}
		if g > 0 {
			exact(t, name+" pooled", down[float32](t, e, out, b*g*d), want[:b*g*d])
		}
		exact(t, name+" kv state", down[float32](t, e, dkv, len(kvState)), kvState)
		exact(t, name+" score state", down[float32](t, e, dsc, len(scoreState)), scoreState)
		if startPos > 0 {
			kernels.GroupStateChunk(kvState, c, b, s, d, ratio, startPos)
			kernels.GroupStateChunk(scoreState, z, b, s, d, ratio, startPos)
			dkv, dsc = up(t, e, kvState), up(t, e, scoreState)
		}
	}
	step("prefill", s, 0)
	step("decode 7", 1, s)
	step("decode 8", 1, s+1)
	step("decode 9", 1, s+2)
}

func TestEngramGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	// engram_max_ngram_size 4, 8 heads, 2 Engram layers
	const b, maxLen, s, startPos, nl, ng, heads, pad = 2, 64, 10, 3, 2, 4, 8, 2
	hist := make([]int64, b*maxLen)
	for i := range hist {
		hist[i] = int64(r.IntN(99092))
		if r.IntN(9) == 0 {
			hist[i] = kernels.EngramDead
		}
	}
	mult := make([][]int64, nl)
	primes := make([][][]int64, nl)
	offsets := make([][]int64, nl)
	var fm, fp, fo []int64
	for l := range nl {
		for range ng {
			mult[l] = append(mult[l], int64(r.Uint64()>>1)|1)
		}
		fm = append(fm, mult[l]...)
		primes[l] = make([][]int64, ng-1)
		for i := range ng - 1 {
			for range heads {
				primes[l][i] = append(primes[l][i], int64(1_000_003+r.IntN(1<<24)))
			}
			fp = append(fp, primes[l][i]...)
		}
		for range (ng - 1) * heads {
			offsets[l] = append(offsets[l], int64(r.IntN(1<<30)))
		}
		fo = append(fo, offsets[l]...)
	}
	cols := (ng - 1) * heads
	want := make([]int64, b*s*nl*cols)
	kernels.EngramHash(want, hist, b, maxLen, s, startPos, mult, primes, offsets, pad)
	out := alloc(t, e, 8*len(want))
	tb := EngramTables{Mult: up(t, e, fm), Primes: up(t, e, fp), Offsets: up(t, e, fo), Layers: nl, Ngram: ng, Heads: heads, Pad: pad}
	if err := e.k.EngramHash(e.s, "engram hash", out, up(t, e, hist), b, maxLen, s, startPos, tb); err != nil {
		t.Fatal(err)
	}
	got := down[int64](t, e, out, len(want))
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("engram hash %d: got %d, want %d", i, got[i], want[i])
		}
	}
	t.Logf("engram hash: %d rows equal", len(want))

	const numRows, width, n = 1000, 1024, 6
	table, scale := e4m3Codes(r, numRows*width), e8m0s(r, numRows*width/32)
	rows := []int64{5, 999, -1, 1000, 17, 500}
	wantL := make([]float32, n*width)
	kernels.EngramLookup(wantL, table, scale, width, rows)
	outL := alloc(t, e, 4*len(wantL))
	if err := e.k.EngramLookup(e.s, "engram lookup", outL, up(t, e, table), up(t, e, scale), width, numRows, up(t, e, rows), n); err != nil {
		t.Fatal(err)
	}
	exact(t, "engram lookup", down[float32](t, e, outL, len(wantL)), wantL)

	const tokens, hc, dim = 3, 4, 4096
	h, key, value := bf16s(r, tokens*hc*dim, 1), bf16s(r, tokens*hc*dim, 1), bf16s(r, tokens*dim, 1)
	omega := make([]float32, hc*dim)
	for i := range omega {
		omega[i] = float32(r.NormFloat64())
	}
	wantG := make([]float32, len(h))
	kernels.EngramGate(wantG, h, tokens, hc, dim, key, value, omega, 1e-20)
	dh := up(t, e, h)
	if err := e.k.EngramGate(e.s, "engram gate", dh, dh, tokens, hc, dim, up(t, e, key), up(t, e, value), up(t, e, omega), 1e-20); err != nil {
		t.Fatal(err)
	}
	// float64 sums in another order: the same fp32 but across a rounding
	// boundary; the output is bf16.
	golden(t, "engram gate (in place)", down[float32](t, e, dh, len(h)), wantG)
}
