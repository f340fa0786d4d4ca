package kernels

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/internal/safetensors"
)

// Test helpers shared by the attention, window, compressor, index, gate and
// engram tests (all prefixed attentionTest to stay out of other files' way).

const attentionTestDir = "../../../testdata/tiny"

type attentionTestSource interface {
	Get(name string) (*safetensors.Tensor, bool)
}

// attentionTestFiles opens golden.safetensors, ops.safetensors and the tiny
// checkpoint; the test is skipped when the test data is missing.
func attentionTestFiles(t testing.TB) (golden, ops, model attentionTestSource) {
	t.Helper()
	g, err := safetensors.Open(filepath.Join(attentionTestDir, "golden.safetensors"))
	if err != nil {
		t.Skipf("golden data: %v", err)
	}
	o, err := safetensors.Open(filepath.Join(attentionTestDir, "ops.safetensors"))
	if err != nil {
		t.Skipf("ops data: %v", err)
	}
	m, err := safetensors.OpenDir(attentionTestDir)
	if err != nil {
		t.Skipf("tiny checkpoint: %v", err)
	}
	t.Cleanup(func() { g.Close(); o.Close(); m.Close() })
	return g, o, m
}

func attentionTestTensor(t testing.TB, src attentionTestSource, name string) *safetensors.Tensor {
	t.Helper()
	ts, ok := src.Get(name)
	if !ok {
		t.Fatalf("tensor %s missing", name)
	}
	return ts
}

func attentionTestHas(src attentionTestSource, name string) bool {
	_, ok := src.Get(name)
	return ok
}

func attentionTestF32(t testing.TB, src attentionTestSource, name string) []float32 {
	t.Helper()
	v, err := attentionTestTensor(t, src, name).Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func attentionTestI64(t testing.TB, src attentionTestSource, name string) []int64 {
	t.Helper()
	v, err := attentionTestTensor(t, src, name).Int64s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func attentionTestI32(t testing.TB, src attentionTestSource, name string) []int32 {
	t.Helper()
	v, err := attentionTestTensor(t, src, name).Int32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func attentionTestRaw(t testing.TB, src attentionTestSource, name string) []byte {
	t.Helper()
	return attentionTestTensor(t, src, name).Data
}

// attentionTestOrd maps a float32 to an integer that is monotone in the
// value, so that differences count representable steps.
func attentionTestOrd(bits uint32, signBit uint32) int64 {
	if bits&signBit != 0 {
		return -int64(bits &^ signBit)
	}
	return int64(bits)
}

// attentionTestBF16ULP is the distance between two bf16 values in bf16 ulps.
func attentionTestBF16ULP(a, b float32) int64 {
	if a == b {
		return 0
	}
	x := attentionTestOrd(uint32(numfmt.BF16Bits(a)), 0x8000)
	y := attentionTestOrd(uint32(numfmt.BF16Bits(b)), 0x8000)
	if x > y {
		return x - y
	}
	return y - x
}

// attentionTestStats summarises got vs want.
type attentionTestStats struct {
	n, diff, ulp1, ulp2plus int
	maxULP                  int64
	maxAbs, relL2           float64
}

func (s attentionTestStats) String() string {
	return fmt.Sprintf("n=%d differ=%d (1ulp %d, >=2ulp %d) maxULP=%d maxAbs=%.3g relL2=%.3g",
		s.n, s.diff, s.ulp1, s.ulp2plus, s.maxULP, s.maxAbs, s.relL2)
}

func attentionTestCompare(got, want []float32) attentionTestStats {
	var s attentionTestStats
	var num, den float64
	s.n = len(want)
	for i, w := range want {
		g := got[i]
		d := float64(g) - float64(w)
		num += d * d
		den += float64(w) * float64(w)
		if g == w || (math.IsNaN(float64(g)) && math.IsNaN(float64(w))) {
			continue
		}
		s.diff++
		s.maxAbs = max(s.maxAbs, math.Abs(d))
		u := attentionTestBF16ULP(g, w)
		s.maxULP = max(s.maxULP, u)
		if u <= 1 {
			s.ulp1++
		} else {
			s.ulp2plus++
		}
	}
	if den > 0 {
		s.relL2 = math.Sqrt(num / den)
	} else {
		s.relL2 = math.Sqrt(num)
	}
	return s
}

func TestSparseAttnOps(t *testing.T) {
	_, ops, _ := attentionTestFiles(t)
	q := attentionTestF32(t, ops, "sparse_attn.q")
	kv := attentionTestF32(t, ops, "sparse_attn.kv")
	sink := attentionTestF32(t, ops, "sparse_attn.attn_sink")
	idx := attentionTestI32(t, ops, "sparse_attn.topk_idxs")
	want := attentionTestF32(t, ops, "sparse_attn.out")
	const b, m, h, d, n, tk = 2, 3, 4, 64, 70, 80
	got := make([]float32, b*m*h*d)
	SparseAttn(got, q, b, m, h, d, kv, n, sink, idx, tk, 0.125)
	st := attentionTestCompare(got, want)
	t.Logf("sparse_attn ops: %v", st)
	if st.maxULP > 2 || st.ulp2plus*100 > st.n {
		t.Errorf("sparse_attn: %v", st)
	}
}

func TestSparseAttnEmptyRow(t *testing.T) {
	q := []float32{1, 2}
	kv := []float32{3, 4}
	out := []float32{7, 7}
	SparseAttn(out, q, 1, 1, 1, 2, kv, 1, []float32{0.5}, []int32{-1, -1}, 2, 1)
	if out[0] != 0 || out[1] != 0 {
		t.Fatalf("all-invalid row: got %v, want zeros", out)
	}
	// One valid row: o = kv·p/(p+exp(sink-s)) with p = 1 (relative to the max).
	SparseAttn(out, q, 1, 1, 1, 2, kv, 1, []float32{float32(math.Inf(-1))}, []int32{-1, 0}, 2, 1)
	if out[0] != 3 || out[1] != 4 {
		t.Fatalf("single row without sink: got %v, want [3 4]", out)
	}
}

// ---------------------------------------------------------------------------
// Block-local simulation of the attention sublayers of the tiny golden run:
// every layer's attention is fed the golden attention input `attn_in` and its
// outputs are compared with the golden intermediates. This exercises
// SparseAttn, the window, compressor and indexer kernels together with the
// colleagues' GEMM, norm, rope and quantiser kernels, exactly in the order of
// the reference Attention.forward (spec §4.5-§4.9).

// attentionTestCfg holds the tiny config (testdata/tiny/config.json).
type attentionTestCfg struct {
	b, s, dim, heads, dh, rd, window, qLora, groups, oRank int
	hi, di, topk, candBlocks, candBlock, maxSeq            int
}

var attentionTestTiny = attentionTestCfg{
	b: 2, s: 29, dim: 128, heads: 4, dh: 64, rd: 16, window: 8, qLora: 64, groups: 2, oRank: 32,
	hi: 8, di: 32, topk: 4, candBlocks: 3, candBlock: 2, maxSeq: 64,
}

// attentionTestShared mirrors the reference's module-global shared_attn slots.
type attentionTestShared struct {
	compressKV, indexK []float32 // [b, maxSeq/r, dh] / [b, maxSeq/r, di]
	rows               int       // row capacity of those caches
	topk               []int32   // [b, s, kk]
	kk                 int
	cand               []uint8 // [b, s, nc]
}

type attentionTestLayer struct {
	t           *testing.T
	model       attentionTestSource
	cfg         attentionTestCfg
	l, ratio    int
	kvSource    bool
	indexSource bool
	candSource  bool
	usesCand    bool
	table       []float32 // rope table [maxSeq, rd/2, 2]
	ring        []float32
	kvState     []float32
	scoreState  []float32
	ckv, kcache []float32
}

func attentionTestNewLayer(t *testing.T, g, model attentionTestSource, l int) *attentionTestLayer {
	c := attentionTestTiny
	ratios := []int{0, 0, 2, 2, 2, 1, 1, 1}
	L := &attentionTestLayer{t: t, model: model, cfg: c, l: l, ratio: ratios[l],
		kvSource: l == 2 || l == 5, indexSource: l == 2 || l == 5 || l == 6,
		candSource: l == 5, usesCand: l > 5,
		ring: make([]float32, c.b*c.window*c.dh)}
	if L.ratio > 0 {
		L.table = attentionTestF32(t, g, "rope.freqs_cis_compressed_layers")
	} else {
		L.table = attentionTestF32(t, g, "rope.freqs_cis_window_layers")
	}
	if L.kvSource {
		rows := c.maxSeq / L.ratio
		L.ckv = make([]float32, c.b*rows*c.dh)
		L.kcache = make([]float32, c.b*rows*c.di)
		L.kvState = make([]float32, c.b*2*c.dh)
		L.scoreState = make([]float32, c.b*2*c.dh)
		for i := range L.scoreState {
			L.scoreState[i] = float32(math.Inf(-1))
		}
	}
	return L
}

func (L *attentionTestLayer) name(s string) string { return fmt.Sprintf("layers.%d.%s", L.l, s) }

// fp8 Linear: act_quant(x) then the fp8 GEMM.
func (L *attentionTestLayer) fp8(x []float32, m, k int, w string, n int) []float32 {
	xa := slices.Clone(x)
	numfmt.ActQuantInplace(xa, 32)
	out := make([]float32, m*n)
	MatmulFP8(out, xa, m, k, attentionTestRaw(L.t, L.model, L.name(w+".weight")), attentionTestRaw(L.t, L.model, L.name(w+".scale")), n)
	return out
}

func (L *attentionTestLayer) norm(x []float32, rows, dim int, w string) []float32 {
	out := make([]float32, rows*dim)
	RMSNorm(out, x, rows, dim, attentionTestF32(L.t, L.model, L.name(w)), 1e-20)
	return out
}

// rope rotates rows of width `width` whose row r sits at position pos[r/per].
func (L *attentionTestLayer) rope(x []float32, rows, per, width int, pos []int, inverse bool) {
	p := make([]int, rows)
	for r := range p {
		p[r] = pos[r/per]
	}
	Rotary(x, rows, width, L.cfg.rd, L.table, p, inverse)
}

// attentionTestOut is what one attention call produced.
type attentionTestOut struct {
	out, latent, windowKV []float32
	groups                int
	topk                  []int32
	kk                    int
	cand                  []uint8
	idx                   []int32
}

// forward runs Attention.forward for x [b, s, dim] at startPos p.
func (L *attentionTestLayer) forward(x []float32, s, p int, sh *attentionTestShared) attentionTestOut {
	c := L.cfg
	m := c.b * s
	var res attentionTestOut
	pos := make([]int, m)
	for r := range pos {
		pos[r] = p + r%s
	}
	// (1) q path
	qr := L.norm(L.fp8(x, m, c.dim, "attn.wq_a", c.qLora), m, c.qLora, "attn.q_norm.weight")
	q := L.fp8(qr, m, c.qLora, "attn.wq_b", c.heads*c.dh)
	L.rope(q, m*c.heads, c.heads, c.dh, pos, false)
	// (2) window KV
	kv := L.norm(L.fp8(x, m, c.dim, "attn.wkv", c.dh), m, c.dh, "attn.kv_norm.weight")
	L.rope(kv, m, 1, c.dh, pos, false)
	numfmt.ActQuantInplace(kv, 32)
	res.windowKV = kv
	var win []float32
	var widx []int32
	var nWin, tw int
	if p == 0 {
		WindowWritePrefill(L.ring, c.b, c.window, c.dh, kv, s)
		win, nWin, tw = kv, s, min(s, c.window)
		widx = WindowIdxPrefill(s, c.window)
	} else {
		WindowWriteDecode(L.ring, c.b, c.window, c.dh, kv, p)
		win, nWin, tw = L.ring, c.window, c.window
		widx = WindowIdxDecode(p, c.window)
		widx = slices.Repeat(widx, s)
	}
	kvAll, n, t, idx := win, nWin, tw, slices.Repeat(widx, c.b)
	if L.ratio > 0 {
		r := L.ratio
		nc := (p + s) / r
		var gpos []int
		// (3) compressor
		if L.kvSource {
			var latent []float32
			if r == 1 {
				lat := make([]float32, m*c.dh)
				MatmulBF16(lat, x, attentionTestF32(L.t, L.model, L.name("attn.compressor.wkv.weight")), m, c.dim, c.dh)
				latent, res.groups = L.norm(lat, m, c.dh, "attn.compressor.norm.weight"), s
			} else {
				cc := make([]float32, m*c.dh)
				zz := make([]float32, m*c.dh)
				MatmulF32(cc, x, attentionTestF32(L.t, L.model, L.name("attn.compressor.wkv.weight")), m, c.dim, c.dh)
				MatmulF32(zz, x, attentionTestF32(L.t, L.model, L.name("attn.compressor.wgate.weight")), m, c.dim, c.dh)
				pooled := make([]float32, c.b*max(s/2, 1)*c.dh)
				res.groups = CompressorPool(pooled, cc, zz, c.b, s, c.dh, 2, L.kvState, L.scoreState, p)
				pooled = pooled[:c.b*res.groups*c.dh]
				numfmt.BF16RoundSlice(pooled)
				latent = L.norm(pooled, c.b*res.groups, c.dh, "attn.compressor.norm.weight")
			}
			if res.groups > 0 {
				res.latent = slices.Clone(latent)
			}
			for g := 0; g < res.groups; g++ {
				if p == 0 {
					gpos = append(gpos, g*r)
				} else {
					gpos = append(gpos, p+1-r)
				}
			}
			sh.compressKV, sh.rows = L.ckv, c.maxSeq/r
		}
		// (4) indexer
		if L.indexSource {
			if nc == 0 {
				sh.topk, sh.kk = nil, 0
			} else {
				if L.kvSource && res.groups > 0 {
					gr := c.b * res.groups
					k := make([]float32, gr*c.di)
					MatmulBF16(k, res.latent, attentionTestF32(L.t, L.model, L.name("attn.indexer.wk.weight")), gr, c.dh, c.di)
					k = L.norm(k, gr, c.di, "attn.indexer.k_norm.weight")
					L.rope(k, gr, 1, c.di, slices.Repeat(gpos, c.b), false)
					numfmt.FP4ActQuantE8M0(k, 32, nil, nil)
					for bi := 0; bi < c.b; bi++ {
						for g := 0; g < res.groups; g++ {
							row := bi*sh.rows + p/r + g
							copy(L.kcache[row*c.di:(row+1)*c.di], k[(bi*res.groups+g)*c.di:])
						}
					}
				}
				if L.kvSource {
					sh.indexK = L.kcache // decode patch: owners always publish their keys
				}
				qi := L.fp8(qr, m, c.qLora, "attn.indexer.wq_b", c.hi*c.di)
				L.rope(qi, m*c.hi, c.hi, c.di, pos, false)
				numfmt.FP4ActQuantE8M0(qi, 32, nil, nil)
				w := make([]float32, m*c.hi)
				MatmulBF16(w, x, attentionTestF32(L.t, L.model, L.name("attn.indexer.weights_proj.weight")), m, c.dim, c.hi)
				ws := float32(math.Pow(float64(c.di), -0.5) * math.Pow(float64(c.hi), -0.5))
				for i := range w {
					w[i] = numfmt.BF16Round(w[i] * ws)
				}
				k := make([]float32, c.b*nc*c.di)
				for bi := 0; bi < c.b; bi++ {
					copy(k[bi*nc*c.di:(bi+1)*nc*c.di], sh.indexK[bi*sh.rows*c.di:])
				}
				score := make([]float32, m*nc)
				IndexScore(score, qi, c.b, s, c.hi, c.di, k, nc, w)
				IndexCausalMask(score, c.b, s, nc, p, r)
				lens := IndexVisibleLens(s, p, r)
				if L.candSource {
					sh.cand = make([]uint8, m*nc)
					SelectCandidateBlocks(sh.cand, score, m, nc, lens, c.candBlocks, c.candBlock)
					res.cand = sh.cand
				} else if L.usesCand {
					ApplyCandidates(score, sh.cand)
				}
				sh.kk = min(c.topk, nc)
				sh.topk = make([]int32, m*sh.kk)
				IndexTopK(sh.topk, score, m, nc, sh.kk, lens, nWin)
			}
		}
		res.topk, res.kk = sh.topk, sh.kk
		// (5) finalise and store the latent
		if L.kvSource && res.groups > 0 {
			lat := slices.Clone(res.latent)
			L.rope(lat, c.b*res.groups, 1, c.dh, slices.Repeat(gpos, c.b), false)
			numfmt.FP4ActQuantE4M3(lat, 16, nil, nil)
			for bi := 0; bi < c.b; bi++ {
				for g := 0; g < res.groups; g++ {
					row := bi*sh.rows + p/r + g
					copy(L.ckv[row*c.dh:(row+1)*c.dh], lat[(bi*res.groups+g)*c.dh:])
				}
			}
		}
		// (6)-(7) concat KV and indices
		n = nWin + nc
		kvAll = make([]float32, c.b*n*c.dh)
		for bi := 0; bi < c.b; bi++ {
			copy(kvAll[bi*n*c.dh:], win[bi*nWin*c.dh:(bi+1)*nWin*c.dh])
			copy(kvAll[(bi*n+nWin)*c.dh:(bi+1)*n*c.dh], sh.compressKV[bi*sh.rows*c.dh:])
		}
		t = tw + sh.kk
		idx = make([]int32, 0, m*t)
		for row := 0; row < m; row++ {
			wrow := widx[(row%s)*tw : (row%s+1)*tw]
			idx = append(idx, wrow...)
			idx = append(idx, sh.topk[row*sh.kk:(row+1)*sh.kk]...)
		}
	}
	res.idx = idx
	o := make([]float32, m*c.heads*c.dh)
	SparseAttn(o, q, c.b, s, c.heads, c.dh, kvAll, n, attentionTestF32(L.t, L.model, L.name("attn.attn_sink")), idx, t, float32(1/math.Sqrt(float64(c.dh))))
	L.rope(o, m*c.heads, c.heads, c.dh, pos, true)
	// grouped output LoRA with wo_a dequantised to bf16 (convert.py)
	dg := c.heads * c.dh / c.groups
	woQ := attentionTestRaw(L.t, L.model, L.name("attn.wo_a.weight"))
	woS := attentionTestRaw(L.t, L.model, L.name("attn.wo_a.scale"))
	woA := make([]float32, len(woQ))
	for i, code := range woQ {
		row, col := i/dg, i%dg
		woA[i] = numfmt.BF16Round(numfmt.E4M3ToF32(code) * numfmt.E8M0ToF32(woS[(row/32)*(dg/32)+col/32]))
	}
	u := make([]float32, m*c.groups*c.oRank)
	GroupedLoRA(u, o, m, c.groups, dg, woA, c.oRank)
	res.out = L.fp8(u, m, c.groups*c.oRank, "attn.wo_b", c.dim)
	return res
}

// attentionTestCheck logs a comparison and fails beyond the tolerance.
func attentionTestCheck(t *testing.T, what string, got, want []float32, relL2 float64) attentionTestStats {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return attentionTestStats{}
	}
	st := attentionTestCompare(got, want)
	t.Logf("%s: %v", what, st)
	if st.relL2 > relL2 {
		t.Errorf("%s: rel L2 %.3g > %.3g", what, st.relL2, relL2)
	}
	return st
}

func attentionTestRows(x []float32, b, rowsPer, width, take int) []float32 {
	out := make([]float32, 0, b*take*width)
	for bi := 0; bi < b; bi++ {
		out = append(out, x[bi*rowsPer*width:(bi*rowsPer+take)*width]...)
	}
	return out
}

// TestAttentionLayersGolden runs layers 0 (window only), 2 (ratio-2 kv and
// index source), 5 (ratio-1 kv source, candidate source) and 6 (re-indexing
// with candidates) block-locally through the prefill and the 12 decode steps.
func TestAttentionLayersGolden(t *testing.T) {
	g, _, model := attentionTestFiles(t)
	c := attentionTestTiny
	layers := []*attentionTestLayer{}
	for _, l := range []int{0, 2, 5, 6} {
		layers = append(layers, attentionTestNewLayer(t, g, model, l))
	}
	calls := []string{"prefill"}
	for i := 0; i < 12; i++ {
		calls = append(calls, fmt.Sprintf("decode%02d", i))
	}
	var worst float64
	for ci, call := range calls {
		s, p := c.s, 0
		if ci > 0 {
			s, p = 1, c.s+ci-1
		}
		var sh attentionTestShared
		for _, L := range layers {
			pre := fmt.Sprintf("%s.L%d.", call, L.l)
			res := L.forward(attentionTestF32(t, g, pre+"attn_in"), s, p, &sh)
			if want := attentionTestI32(t, g, pre+"attn_idxs"); !slices.Equal(res.idx, want) {
				t.Errorf("%sattn_idxs:\n got %v\nwant %v", pre, res.idx, want)
			}
			if name := pre + "index_topk"; attentionTestHas(g, name) {
				if want := attentionTestI32(t, g, name); !slices.Equal(res.topk, want) {
					t.Errorf("%s:\n got %v\nwant %v", name, res.topk, want)
				}
			}
			if name := pre + "candidates"; attentionTestHas(g, name) {
				if want := attentionTestRaw(t, g, name); !slices.Equal(res.cand, want) {
					t.Errorf("%s:\n got %v\nwant %v", name, res.cand, want)
				}
			}
			if name := pre + "compressor_latent"; attentionTestHas(g, name) {
				attentionTestCheck(t, name, res.latent, attentionTestF32(t, g, name), 1e-2)
			} else if res.latent != nil && res.groups > 0 {
				t.Errorf("%s: latent produced but none in the golden data", pre)
			}
			st := attentionTestCheck(t, pre+"attn_out", res.out, attentionTestF32(t, g, pre+"attn_out"), 1e-2)
			worst = max(worst, st.relL2)
		}
		if ci == 0 || ci == len(calls)-1 {
			when := "after_prefill"
			if ci > 0 {
				when = "after_decode"
			}
			for _, L := range layers {
				pre := fmt.Sprintf("%s.L%d.", when, L.l)
				attentionTestCheck(t, pre+"window_kv_cache", L.ring, attentionTestF32(t, g, pre+"window_kv_cache"), 1e-2)
				if L.kvSource {
					nc := (p + s) / L.ratio
					rows := c.maxSeq / L.ratio
					attentionTestCheck(t, pre+"compress_kv_cache", attentionTestRows(L.ckv, c.b, rows, c.dh, nc), attentionTestF32(t, g, pre+"compress_kv_cache"), 1e-2)
					attentionTestCheck(t, pre+"index_k_cache", attentionTestRows(L.kcache, c.b, rows, c.di, nc), attentionTestF32(t, g, pre+"index_k_cache"), 1e-2)
				}
			}
		}
	}
	t.Logf("worst attn_out rel L2 over all calls and layers: %.3g", worst)
}
