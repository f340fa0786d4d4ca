package kernels

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ds4go/ds4/internal/numfmt"
)

// engramTestConsts reads the hash constants stored with the golden run.
func engramTestConsts(t *testing.T, g attentionTestSource) (mult [][]int64, primes [][][]int64, offsets [][]int64, pad int64) {
	m := attentionTestI64(t, g, "engram.multipliers") // [layers, maxNgram]
	p := attentionTestI64(t, g, "engram.primes")      // [layers, maxNgram-1, heads]
	o := attentionTestI64(t, g, "engram.offsets")     // [layers, (maxNgram-1)*heads]
	ms := attentionTestTensor(t, g, "engram.multipliers").Shape
	ps := attentionTestTensor(t, g, "engram.primes").Shape
	nl, ng, heads := ms[0], ms[1], ps[2]
	for l := 0; l < nl; l++ {
		mult = append(mult, m[l*ng:(l+1)*ng])
		var pl [][]int64
		for i := 0; i < ng-1; i++ {
			pl = append(pl, p[(l*(ng-1)+i)*heads:(l*(ng-1)+i+1)*heads])
		}
		primes = append(primes, pl)
		offsets = append(offsets, o[l*(ng-1)*heads:(l+1)*(ng-1)*heads])
	}
	return mult, primes, offsets, attentionTestI64(t, g, "engram.pad_id")[0]
}

func engramTestMap(tokenMap, ids []int64) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = tokenMap[id]
	}
	return out
}

func TestEngramHashGolden(t *testing.T) {
	g, _, _ := attentionTestFiles(t)
	mult, primes, offsets, pad := engramTestConsts(t, g)
	tokenMap := attentionTestI64(t, g, "engram.token_map")
	const b, s, maxLen, steps = 2, 29, 64, 12
	cols := len(mult) * len(offsets[0])
	hist := make([]int64, b*maxLen)
	ids := attentionTestI64(t, g, "inputs.input_ids")
	EngramHistoryWrite(hist, b, maxLen, engramTestMap(tokenMap, ids), s, 0)
	got := make([]int64, b*s*cols)
	EngramHash(got, hist, b, maxLen, s, 0, mult, primes, offsets, pad)
	if want := attentionTestI64(t, g, "prefill.engram.hash_ids"); !slices.Equal(got, want) {
		t.Fatalf("prefill hash ids:\n got %v\nwant %v", got, want)
	}
	dec := attentionTestI64(t, g, "inputs.decode_input_ids") // [b, steps]
	for i := 0; i < steps; i++ {
		step := []int64{dec[i], dec[steps+i]}
		EngramHistoryWrite(hist, b, maxLen, engramTestMap(tokenMap, step), 1, s+i)
		got := make([]int64, b*cols)
		EngramHash(got, hist, b, maxLen, 1, s+i, mult, primes, offsets, pad)
		if want := attentionTestI64(t, g, fmt.Sprintf("decode%02d.engram.hash_ids", i)); !slices.Equal(got, want) {
			t.Fatalf("decode%02d hash ids: got %v want %v", i, got, want)
		}
	}
}

func TestEngramHashDeadAndPad(t *testing.T) {
	// history [5, DEAD, 7]; multipliers 1, 10, 100; primes big enough to keep values.
	hist := []int64{5, EngramDead, 7}
	mult := [][]int64{{1, 10, 100}}
	primes := [][][]int64{{{1 << 40}, {1 << 40}}}
	offsets := [][]int64{{0, 1000}}
	out := make([]int64, 3*2)
	EngramHash(out, hist, 1, 3, 3, 0, mult, primes, offsets, 9)
	// t=0: tokens 5, pad, pad -> 5^90, (5^90)^900
	// t=1: DEAD blocks at σ=0 -> all pad: 9^90, 9^90^900
	// t=2: 7, then DEAD blocks σ=1 and (cumulative) σ=2: 7^90, 7^90^900
	want := []int64{5 ^ 90, 5 ^ 90 ^ 900 + 1000, 9 ^ 90, 9 ^ 90 ^ 900 + 1000, 7 ^ 90, 7 ^ 90 ^ 900 + 1000}
	if !slices.Equal(out, want) {
		t.Fatalf("got %v want %v", out, want)
	}
	if engramFloorMod(-7, 5) != 3 || engramFloorMod(7, 5) != 2 {
		t.Fatal("floor mod")
	}
}

// TestEngramGolden runs the whole Engram module of layer 1 (hash ids ->
// table lookup -> wkv fp8 GEMM -> gate) on the golden stream entering it
// (the output of block 0) and compares with the golden Engram output.
func TestEngramGolden(t *testing.T) {
	g, _, model := attentionTestFiles(t)
	const hc, dim, width = 4, 128, 32
	pre := "layers.1.engram."
	table := attentionTestRaw(t, model, pre+"embed.weight")
	scale := attentionTestRaw(t, model, pre+"embed.scale")
	wkv := attentionTestRaw(t, model, pre+"wkv.weight")
	wkvScale := attentionTestRaw(t, model, pre+"wkv.scale")
	qw := attentionTestF32(t, model, pre+"q_weight")
	kw := attentionTestF32(t, model, pre+"k_weight")
	omega := make([]float32, len(qw))
	for i := range qw {
		omega[i] = qw[i] * kw[i]
	}
	calls := []string{"prefill"}
	for i := 0; i < 12; i++ {
		calls = append(calls, fmt.Sprintf("decode%02d", i))
	}
	var all attentionTestStats
	for _, call := range calls {
		h := attentionTestF32(t, g, call+".L0.stream_out")
		want := attentionTestF32(t, g, call+".L1.engram_out")
		hashes := attentionTestI64(t, g, call+".engram.hash_ids") // [b, s, layers, cols]
		hs := attentionTestTensor(t, g, call+".engram.hash_ids").Shape
		tokens, nl, cols := hs[0]*hs[1], hs[2], hs[3]
		rows := make([]int64, 0, tokens*cols)
		for tk := 0; tk < tokens; tk++ {
			rows = append(rows, hashes[(tk*nl+0)*cols:(tk*nl+1)*cols]...) // layer 1 = engram layer 0
		}
		e := make([]float32, tokens*cols*width)
		EngramLookup(e, table, scale, width, rows)
		numfmt.ActQuantInplace(e, 32)
		kv := make([]float32, tokens*dim*(hc+1))
		MatmulFP8(kv, e, tokens, cols*width, wkv, wkvScale, dim*(hc+1))
		key := make([]float32, tokens*hc*dim)
		value := make([]float32, tokens*dim)
		for tk := 0; tk < tokens; tk++ {
			copy(key[tk*hc*dim:(tk+1)*hc*dim], kv[tk*(hc+1)*dim:])
			copy(value[tk*dim:(tk+1)*dim], kv[tk*(hc+1)*dim+hc*dim:])
		}
		got := make([]float32, len(h))
		EngramGate(got, h, tokens, hc, dim, key, value, omega, 1e-20)
		st := attentionTestCompare(got, want)
		t.Logf("%s engram_out: %v", call, st)
		all.n += st.n
		all.diff += st.diff
		all.ulp1 += st.ulp1
		all.ulp2plus += st.ulp2plus
		all.maxULP = max(all.maxULP, st.maxULP)
		all.relL2 = max(all.relL2, st.relL2)
		if st.relL2 > 1e-2 {
			t.Errorf("%s engram_out rel L2 %.3g > 1e-2", call, st.relL2)
		}
	}
	t.Logf("engram_out all calls: %v (relL2 = worst call)", all)
}
