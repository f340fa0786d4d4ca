package backendtest

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/ir"
)

// Reasons shared by many cases.
const (
	whyMove   = "data movement: the values are copied, never computed"
	whySelect = "selection or index arithmetic: integers, masks or chosen elements, nothing rounded"
	whyElem   = "elementwise, fp32 (or float64 rounded once) as the op's doc says, then one rounding to the result dtype: one right answer"
	whyQuant  = "elementwise quantisation with power-of-two or e4m3 scales, RNE and saturation (golden README: bit-exact)"
	whyOrder  = "the op fixes its summation order (the doc's order); fp32 adds in that order have one answer"
)

// Cases returns the conformance table: at least one case for every op of
// ir.Ops (TestEveryOpHasACase), most at the released widths.
func Cases() []Case { return cases }

var cases []Case

// add appends a case; its op is the name's part before the slash.
func add(name string, tol Tol, build func(r *rand.Rand) *Instance) {
	op, _, _ := strings.Cut(name, "/")
	cases = append(cases, Case{Name: name, Op: op, Tol: tol, Build: build})
}

// rel is short for Released in the table.
var rel = Released

func init() {
	sources()
	elementwise()
	reductions()
	shapes()
	gathers()
	products()
	norms()
	attention()
	indexer()
	engram()
	fused()
}

func sources() {
	add("input/tokens_and_activation", exact(whyMove), func(r *rand.Rand) *Instance {
		b := newBuilder(r, "input", 2, 3, 8, 0)
		return b.out(b.tokens(int64(rel.Vocab)), b.input(floats(r, ir.BF16, 1, 2, 3, rel.Dim), "B", "S", rel.Dim))
	})
	add("weight/bf16_matrix", exact(whyMove), func(r *rand.Rand) *Instance {
		b := newBuilder(r, "weight", 1, 1, 8, 0)
		return b.out(b.weight("w", floatWeight(floats(r, ir.BF16, 0.05, 32, rel.Dim), "bf16", ir.BF16, "BF16")))
	})
	add("weight/f32_from_bf16", exact(whyMove), func(r *rand.Rand) *Instance {
		b := newBuilder(r, "weight", 1, 1, 8, 0)
		return b.out(b.weight("head", floatWeight(floats(r, ir.BF16, 0.05, 32, rel.Dim), "bf16", ir.F32, "BF16")))
	})
	add("weight/f32_vector", exact(whyMove), func(r *rand.Rand) *Instance {
		b := newBuilder(r, "weight", 1, 1, 8, 0)
		return b.out(b.weight("bias", floatWeight(floats(r, ir.F32, 0.1, rel.Experts), "f32", ir.F32, "F32")))
	})
	add("const/f32_and_i64", exact(whyMove), func(r *rand.Rand) *Instance {
		b := newBuilder(r, "const", 1, 1, 8, 0)
		f := b.g.Source("const", ir.T(ir.F32, rel.HC), ir.Attrs{"floats": []float64{1, 0, 0, 0}})
		n := b.g.Source("const", ir.T(ir.I64, 1), ir.Attrs{"ints": []int64{2}})
		return b.out(f, n)
	})
	add("state/read", exact(whyMove), func(r *rand.Rand) *Instance {
		b := newBuilder(r, "state", 1, 1, 8, 0)
		return b.out(b.state("ring", "window", floats(r, ir.BF16, 1, 1, rel.Window, rel.HeadDim), "B", rel.Window, rel.HeadDim))
	})
	for _, v := range []struct {
		name      string
		base, fac float64
		orig, m   int
	}{
		{"rope_table/plain", rel.RopeTheta, 1, 0, 16},
		{"rope_table/yarn", rel.CompressRopeTheta, rel.RopeFactor, rel.OriginalSeqLen, 16},
	} {
		add(v.name, exact("the table's values are computed once by the runtime (Call.Rope) and handed to the backend: it must pass them through"), func(r *rand.Rand) *Instance {
			b := newBuilder(r, "rope_table", 1, 1, v.m, 0)
			return b.out(b.g.Source("rope_table", ir.T(ir.F32, "M", rel.RopeDim/2, 2), ir.Attrs{"dim": i(rel.RopeDim), "base": v.base,
				"factor": v.fac, "original_seq_len": i(v.orig), "beta_fast": rel.BetaFast, "beta_slow": rel.BetaSlow}))
		})
	}
}

// withTies replaces every 5th value by the exact midpoint between two
// neighbouring bf16 values (a rounding tie), and a few by ±0, ±Inf, NaN.
func withTies(t *backends.Tensor) *backends.Tensor {
	for i := range t.F32 {
		if i%5 == 0 {
			t.F32[i] = math.Float32frombits(math.Float32bits(numfmt.BF16Round(t.F32[i])) | 0x8000)
		}
	}
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3.3895314e38}
	for k, v := range specials {
		t.F32[(k*7919+1)%len(t.F32)] = v
	}
	return t
}

// unaryCase adds a case of a one-argument op over x.
func unaryCase(name, op string, attrs ir.Attrs, tol Tol, x func(r *rand.Rand) *backends.Tensor) {
	add(name, tol, func(r *rand.Rand) *Instance {
		t := x(r)
		b := newBuilder(r, op, 1, 2, 8, 0)
		return b.out(b.add(op, attrs, b.input(t)))
	})
}

// binaryCase adds a case of a two-argument op over x and y.
func binaryCase(name, op string, tol Tol, x, y func(r *rand.Rand) *backends.Tensor) {
	add(name, tol, func(r *rand.Rand) *Instance {
		b := newBuilder(r, op, 1, 2, 8, 0)
		return b.out(b.add(op, nil, b.input(x(r)), b.input(y(r))))
	})
}

func f32(sd float64, shape ...int) func(r *rand.Rand) *backends.Tensor {
	return func(r *rand.Rand) *backends.Tensor { return floats(r, ir.F32, sd, shape...) }
}

func bf16(sd float64, shape ...int) func(r *rand.Rand) *backends.Tensor {
	return func(r *rand.Rand) *backends.Tensor { return floats(r, ir.BF16, sd, shape...) }
}

func pos32(lo, hi float64, shape ...int) func(r *rand.Rand) *backends.Tensor {
	return func(r *rand.Rand) *backends.Tensor { return uniform(r, ir.F32, lo, hi, shape...) }
}

// Transcendental elementwise ops compute in fp32 by their doc; the
// reference evaluates them in float64 and rounds once, and fp32 libraries
// (a GPU's expf, gorgonia's) are within 2 ulp of that.
var (
	libm32 = Tol{Kind: F32ULP, ULP: 2,
		Why: "exp/log1p in fp32 by the op's doc: the reference rounds a float64 value once, fp32 libraries are within 2 ulp of it"}
	libm16 = Tol{Kind: BF16ULP, ULP: 0, Frac: 0.001,
		Why: "an fp32 exp within 2 ulp of the reference's, then one bf16 rounding: bit-exact but where the 2 ulp cross a rounding boundary (~2^-15 of the elements)"}
)

func elementwise() {
	ex := exact(whyElem)
	tok := []int{1, 2, rel.Dim}
	unaryCase("cast/f32_to_bf16", "cast", ir.Attrs{"to": "bf16"}, exact("rounding to nearest even, NaN kept: one right answer (ties and specials included)"),
		func(r *rand.Rand) *backends.Tensor { return withTies(floats(r, ir.F32, 3, tok...)) })
	unaryCase("cast/f32_to_f16", "cast", ir.Attrs{"to": "f16"}, exact("rounding to nearest even: one right answer"), f32(3, tok...))
	unaryCase("cast/bf16_to_f32", "cast", ir.Attrs{"to": "f32"}, exact("widening is exact"), bf16(3, tok...))
	unaryCase("sigmoid/f32_mix", "sigmoid", nil, libm32, f32(4, 1, 2, 3*rel.HC))
	unaryCase("sigmoid/bf16", "sigmoid", nil, libm16, bf16(4, tok...))
	unaryCase("silu/f32", "silu", nil, libm32, f32(3, 2, rel.Active, rel.Inter))
	unaryCase("rsqrt/f32", "rsqrt", nil, ex, pos32(1e-3, 10, 1, 2, 1))
	unaryCase("sqrt/f32_gate", "sqrt", nil, ex, pos32(0, 5, 3, rel.Experts))
	unaryCase("softplus/f32_gate", "softplus", nil, libm32, f32(12, 3, rel.Experts)) // both branches (x > 20)
	unaryCase("exp/f32", "exp", nil, libm32, f32(3, 2, 64))
	unaryCase("relu/bf16", "relu", nil, ex, bf16(1, tok...))
	unaryCase("clamp/hi", "clamp", ir.Attrs{"hi": rel.SwiGLULimit}, ex, f32(8, 2, rel.Active, rel.Inter))
	unaryCase("clamp/lo_hi", "clamp", ir.Attrs{"lo": -rel.SwiGLULimit, "hi": rel.SwiGLULimit}, ex, f32(8, 2, rel.Active, rel.Inter))
	unaryCase("add_scalar/eps", "add_scalar", ir.Attrs{"value": rel.HCEps}, ex, pos32(0, 1, 1, 2, rel.HC))
	unaryCase("mul_scalar/route_scale", "mul_scalar", ir.Attrs{"value": rel.RouteScale}, ex, f32(0.3, 3, rel.Active))
	unaryCase("mul_scalar/bf16_index_weights", "mul_scalar", ir.Attrs{"value": math.Pow(float64(rel.IdxDim), -0.5) * math.Pow(float64(rel.IdxHeads), -0.5)}, ex, bf16(1, 1, 2, rel.IdxHeads))
	binaryCase("add/f32_moe", "add", ex, f32(1, 3, rel.Dim), f32(1, 3, rel.Dim))
	binaryCase("add/broadcast_base", "add", ex, f32(1, 1, 2, rel.HC), f32(1, rel.HC))
	binaryCase("add/bf16_broadcast", "add", ex, bf16(1, tok...), bf16(1, rel.Dim))
	binaryCase("sub/broadcast", "sub", ex, f32(1, 1, 2, rel.HC, rel.HC), f32(1, 1, 2, rel.HC, 1))
	binaryCase("mul/scale_slice", "mul", ex, f32(1, 1, 2, rel.HC), f32(1, 1))
	binaryCase("mul/bf16", "mul", ex, bf16(1, 2, rel.Dim), bf16(1, rel.Dim))
	binaryCase("div/sinkhorn_norm", "div", ex, pos32(0, 1, 1, 2, rel.HC, rel.HC), pos32(0.5, 4, 1, 2, 1, rel.HC))
	add("mask_fill/candidates", exact(whySelect), func(r *rand.Rand) *Instance {
		b := newBuilder(r, "mask_fill", 1, 2, 8, 0)
		return b.out(b.add("mask_fill", nil, b.input(floats(r, ir.BF16, 1, 1, 2, 256)), b.input(mask(r, 0.3, 1, 2, 256))))
	})
	// act_quant: a zero block, a block below the 1e-4 floor, otherwise normal.
	quantIn := func(sd float64, shape ...int) func(r *rand.Rand) *backends.Tensor {
		return func(r *rand.Rand) *backends.Tensor {
			t := floats(r, ir.BF16, sd, shape...)
			clear(t.F32[:32])
			for j := 32; j < 64; j++ {
				t.F32[j] = numfmt.BF16Round(t.F32[j] * 1e-6)
			}
			return t
		}
	}
	unaryCase("act_quant/dim", "act_quant", ir.Attrs{"block": i(32)}, exact(whyQuant), quantIn(2, 1, 2, rel.Dim))
	unaryCase("act_quant/head_dim", "act_quant", ir.Attrs{"block": i(32)}, exact(whyQuant), quantIn(2, 1, 3, rel.HeadDim))
	unaryCase("fp4_quant/e8m0_indexer_q", "fp4_quant", ir.Attrs{"block": i(32), "scale": "e8m0"}, exact(whyQuant), quantIn(1, 1, 2, rel.IdxHeads, rel.IdxDim))
	unaryCase("fp4_quant/e4m3_latent", "fp4_quant", ir.Attrs{"block": i(16), "scale": "e4m3"}, exact(whyQuant), quantIn(1, 1, 2, rel.HeadDim))
}

func reductions() {
	unaryCase("mean_sq/hc_flat", "mean_sq", ir.Attrs{"axis": i(-1)}, reorder32, f32(1, 1, 2, rel.HC*rel.Dim))
	// sum's doc fixes the order (sequential); mean_sq's and softmax's do not
	unaryCase("sum/sinkhorn_cols", "sum", ir.Attrs{"axis": i(-2)}, exact(whyOrder+" (sequential)"), pos32(0, 1, 1, 2, rel.HC, rel.HC))
	unaryCase("sum/gate_weights", "sum", ir.Attrs{"axis": i(-1)}, exact(whyOrder+" (sequential)"), pos32(0, 1, 3, rel.Active))
	soft := Tol{Kind: RelAbs, Rel: 1e-5, Why: "exp in fp32 (≤ 1 ulp apart) and a sum of ≤ 384 terms that a backend may reorder: ≤ 1e-5 relative"}
	unaryCase("softmax/comb", "softmax", ir.Attrs{"axis": i(-1)}, soft, f32(2, 1, 2, rel.HC, rel.HC))
	unaryCase("softmax/gate", "softmax", ir.Attrs{"axis": i(-1)}, soft, f32(2, 3, rel.Experts))
}

func shapes() {
	mv := exact(whyMove)
	add("reshape/heads_flat", mv, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "reshape", 1, 2, 8, 0)
		x := b.input(floats(r, ir.BF16, 1, 1, 2, rel.Heads, rel.HeadDim), "B", "S", rel.Heads, rel.HeadDim)
		return b.out(b.add("reshape", ir.Attrs{"shape": ir.Dims("B", "S", rel.Heads*rel.HeadDim).String()}, x))
	})
	unaryCase("slice/engram_key", "slice", ir.Attrs{"axis": i(-1), "start": i(0), "end": i(rel.HC * rel.Dim)}, mv, bf16(1, 1, 2, (rel.HC+1)*rel.Dim))
	unaryCase("slice/mix_part", "slice", ir.Attrs{"axis": i(-1), "start": i(2 * rel.HC), "end": i((2 + rel.HC) * rel.HC)}, mv, f32(1, 1, 2, (2+rel.HC)*rel.HC))
	unaryCase("last/prompt_position", "last", ir.Attrs{"axis": i(1)}, mv, f32(1, 2, 5, rel.Dim))
	add("concat/kv_rows", mv, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "concat", 1, 2, 8, 0)
		w := b.input(floats(r, ir.BF16, 1, 1, rel.Window, rel.HeadDim))
		c := b.input(floats(r, ir.BF16, 1, 1, 5, rel.HeadDim))
		return b.out(b.add("concat", ir.Attrs{"axis": i(1)}, w, c))
	})
	add("concat/i32_idx", mv, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "concat", 1, 2, 8, 0)
		x := b.input(i32s(r, 1, 2, rel.Window))
		y := b.input(i32s(r, 1, 2, 7))
		return b.out(b.add("concat", ir.Attrs{"axis": i(2)}, x, y))
	})
	unaryCase("expand/hc", "expand", ir.Attrs{"axis": i(2), "n": i(rel.HC)}, mv, bf16(1, 1, 2, rel.Dim))
}

// asF32 relabels a tensor of bf16 values as f32 (the model's casts of
// bf16 values to f32 are exact).
func asF32(t *backends.Tensor) *backends.Tensor {
	t.DType = ir.F32
	return t
}

// i32s is an i32 index tensor with values in [-1, 200).
func i32s(r *rand.Rand, shape ...int) *backends.Tensor {
	t := &backends.Tensor{DType: ir.I32, Shape: shape, I32: make([]int32, numel(shape))}
	for k := range t.I32 {
		t.I32[k] = int32(r.IntN(201) - 1)
	}
	return t
}

// distinctBF16 returns n distinct bf16 values (no ties), both signs, in a
// random order.
func distinctBF16(r *rand.Rand, n int) []float32 {
	const lo, hi = 0x2000, 0x5f00 // positive bf16 patterns ≈ 1e-19 .. 9e18
	if n > 2*(hi-lo) {
		panic("backendtest: too many distinct bf16 values")
	}
	out := make([]float32, 0, n)
	for _, k := range r.Perm(2 * (hi - lo))[:n] {
		bits := uint32(lo+k/2) << 16
		if k%2 == 1 {
			bits |= 1 << 31
		}
		out = append(out, math.Float32frombits(bits))
	}
	return out
}

func gathers() {
	sel := exact(whySelect)
	add("embed/dim", exact(whyMove), func(r *rand.Rand) *Instance {
		b := newBuilder(r, "embed", 2, 3, 8, 0)
		tab := b.weight("embed.weight", floatWeight(floats(r, ir.BF16, 1, 1024, rel.Dim), "bf16", ir.BF16, "BF16"))
		return b.out(b.add("embed", nil, tab, b.tokens(1024)))
	})
	add("token_map/engram", sel, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "token_map", 2, 3, 8, 0)
		m := b.weight("token_map", intWeight(randInts(r, 4096, int64(rel.EngCompressedVocab)), 4096))
		return b.out(b.add("token_map", nil, m, b.tokens(4096)))
	})
	add("gather/gate_weights", sel, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "gather", 3, 1, 8, 0)
		s := b.input(floats(r, ir.F32, 1, 3, rel.Experts))
		idx := b.input(ints(distinctRows(r, 3, rel.Active, int64(rel.Experts)), 3, rel.Active))
		return b.out(b.add("gather", nil, s, idx))
	})
	add("topk_idx/gate", sel, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "topk_idx", 3, 1, 8, 0)
		x := &backends.Tensor{DType: ir.F32, Shape: []int{3, rel.Experts}, F32: distinctBF16(r, 3*rel.Experts)}
		return b.out(b.add("topk_idx", ir.Attrs{"k": i(rel.Active)}, b.input(x)))
	})
	add("topk_idx/ties", exact("selection; the op's doc breaks ties by the lower index"), func(r *rand.Rand) *Instance {
		b := newBuilder(r, "topk_idx", 4, 1, 8, 0)
		x := &backends.Tensor{DType: ir.F32, Shape: []int{4, 64}, F32: make([]float32, 4*64)}
		for k := range x.F32 {
			x.F32[k] = float32(r.IntN(8))
		}
		return b.out(b.add("topk_idx", ir.Attrs{"k": i(8)}, b.input(x)))
	})
}

func products() {
	add("matmul/bf16_compressor", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "matmul", 1, 2, 8, 0)
		w := b.weight("wkv", floatWeight(floats(r, ir.BF16, 0.014, rel.HeadDim, rel.Dim), "bf16", ir.BF16, "BF16"))
		return b.out(b.add("matmul", nil, b.input(floats(r, ir.BF16, 1, 1, 2, rel.Dim), "B", "S", rel.Dim), w))
	})
	add("matmul/f32_gate", reorder32, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "matmul", 3, 1, 8, 0)
		w := b.weight("gate", floatWeight(floats(r, ir.BF16, 0.014, rel.Experts, rel.Dim), "bf16", ir.F32, "BF16"))
		return b.out(b.add("matmul", nil, b.input(asF32(floats(r, ir.BF16, 1, 3, rel.Dim))), w))
	})
	add("matmul/f32_hc_fn", reorder32, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "matmul", 1, 2, 8, 0)
		mix := (2 + rel.HC) * rel.HC
		w := b.weight("fn", floatWeight(floats(r, ir.F32, 0.007, mix, rel.HC*rel.Dim), "f32", ir.F32, "F32"))
		return b.out(b.add("matmul", nil, b.input(floats(r, ir.F32, 1, 1, 2, rel.HC*rel.Dim)), w))
	})
	add("matmul_fp8/wq_a", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "matmul_fp8", 1, 2, 8, 0)
		w := b.weight("wq_a", fp8Weight(r, rel.QLora, rel.Dim))
		return b.out(b.add("matmul_fp8", nil, b.input(actQuanted(r, 1, 1, 2, rel.Dim), "B", "S", rel.Dim), w))
	})
	add("matmul_fp8/partial_row_block", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "matmul_fp8", 1, 3, 8, 0)
		w := b.weight("w", fp8Weight(r, 40, 96))
		return b.out(b.add("matmul_fp8", nil, b.input(actQuanted(r, 1, 1, 3, 96)), w))
	})
	add("matmul_fp8/linear_with_act_quant", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "matmul_fp8", 1, 2, 8, 0)
		w := b.weight("wkv", fp8Weight(r, rel.HeadDim, rel.Dim))
		x := b.add("act_quant", ir.Attrs{"block": i(32)}, b.input(floats(r, ir.BF16, 1, 1, 2, rel.Dim), "B", "S", rel.Dim))
		return b.out(b.add("matmul_fp8", nil, x, w))
	})
	add("matmul_fp4/inter", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "matmul_fp4", 1, 2, 8, 0)
		w := b.weight("w1", fp4Weight(r, rel.Inter, rel.Dim))
		return b.out(b.add("matmul_fp4", nil, b.input(actQuanted(r, 1, 1, 2, rel.Dim)), w))
	})
	// wo_a is fp8 on disk and used as bf16(e4m3·e8m0): the backend's
	// binding dequantises (or its kernel does). The rank is cut from 1024
	// to 256 per group to keep the reference's time small; the group
	// width (H·D/G = 4096) is the released one.
	add("grouped_matmul/wo_a_fp8", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "grouped_matmul", 1, 2, 8, 0)
		dg, rank := rel.Heads*rel.HeadDim/rel.OGroups, 256
		hw := fp8Weight(r, rel.OGroups*rank, dg)
		hw.DType = ir.BF16
		w := b.weight("wo_a", hw)
		return b.out(b.add("grouped_matmul", ir.Attrs{"groups": i(rel.OGroups)}, b.input(floats(r, ir.BF16, 1, 1, 2, rel.Heads*rel.HeadDim), "B", "S", rel.Heads*rel.HeadDim), w))
	})
	add("grouped_matmul/bf16", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "grouped_matmul", 1, 3, 8, 0)
		w := b.weight("w", floatWeight(floats(r, ir.BF16, 0.1, rel.OGroups*16, 64), "bf16", ir.BF16, "BF16"))
		return b.out(b.add("grouped_matmul", ir.Attrs{"groups": i(rel.OGroups)}, b.input(floats(r, ir.BF16, 1, 1, 3, rel.OGroups*64)), w))
	})
	// Routed experts at the released widths: six experts (the stack is the
	// checkpoint's, cut from 384 to the k chosen), one token.
	add("expert_matmul/fp4_w1", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "expert_matmul", 1, 1, 8, 0)
		w := b.weight("experts.w1", expertStack(r, ir.FP4E2M1, rel.Active, rel.Inter, rel.Dim))
		idx := b.input(ints(distinctRows(r, 1, rel.Active, int64(rel.Active)), 1, rel.Active))
		return b.out(b.add("expert_matmul", nil, b.input(actQuanted(r, 1, 1, rel.Dim)), w, idx))
	})
	add("expert_matmul/fp4_384_per_slot", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "expert_matmul", 3, 1, 8, 0)
		w := b.weight("experts.w2", expertStack(r, ir.FP4E2M1, rel.Experts, 64, 256))
		idx := b.input(ints(distinctRows(r, 3, rel.Active, int64(rel.Experts)), 3, rel.Active))
		return b.out(b.add("expert_matmul", nil, b.input(actQuanted(r, 1, 3, rel.Active, 256)), w, idx))
	})
	add("expert_matmul/fp8", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "expert_matmul", 4, 1, 8, 0)
		w := b.weight("experts.w3", expertStack(r, ir.F8E4M3, 16, 96, 128))
		idx := b.input(ints(distinctRows(r, 4, rel.Active, 16), 4, rel.Active))
		return b.out(b.add("expert_matmul", nil, b.input(actQuanted(r, 1, 4, 128)), w, idx))
	})
	add("moe_combine/dim", exact(whyOrder+" (increasing expert id)"), func(r *rand.Rand) *Instance {
		b := newBuilder(r, "moe_combine", 3, 1, 8, 0)
		y := b.input(floats(r, ir.BF16, 1, 3, rel.Active, rel.Dim))
		idx := b.input(ints(distinctRows(r, 3, rel.Active, int64(rel.Experts)), 3, rel.Active))
		return b.out(b.add("moe_combine", nil, y, idx))
	})
}

func norms() {
	for _, d := range []int{rel.Dim, rel.HeadDim} {
		add("rmsnorm/"+map[int]string{rel.Dim: "dim", rel.HeadDim: "head_dim"}[d], golden, func(r *rand.Rand) *Instance {
			b := newBuilder(r, "rmsnorm", 1, 2, 8, 0)
			w := b.weight("norm", floatWeight(uniform(r, ir.BF16, 0.5, 1.5, d), "bf16", ir.BF16, "BF16"))
			return b.out(b.add("rmsnorm", ir.Attrs{"eps": rel.NormEps}, b.input(floats(r, ir.BF16, 2, 1, 2, d), "B", "S", d), w))
		})
	}
	stream := func(r *rand.Rand) *backends.Tensor { return floats(r, ir.BF16, 1, 1, 2, rel.HC, rel.Dim) }
	add("hc_pre/mix", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "hc_pre", 1, 2, 8, 0)
		return b.out(b.add("hc_pre", nil, b.input(stream(r), "B", "S", rel.HC, rel.Dim), b.input(uniform(r, ir.F32, 0, 1, 1, 2, rel.HC), "B", "S", rel.HC)))
	})
	add("hc_pre/const_pre", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "hc_pre", 1, 2, 8, 0)
		pre := b.g.Source("const", ir.T(ir.F32, rel.HC), ir.Attrs{"floats": []float64{1, 0, 0, 0}})
		return b.out(b.add("hc_pre", nil, b.input(stream(r)), pre))
	})
	add("hc_post/dim_batch2", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "hc_post", 2, 2, 8, 0)
		y := b.input(floats(r, ir.BF16, 1, 2, 2, rel.Dim))
		post := b.input(uniform(r, ir.F32, 0, 2, 2, 2, rel.HC))
		comb := b.input(uniform(r, ir.F32, 0, 1, 2, 2, rel.HC, rel.HC))
		return b.out(b.add("hc_post", nil, y, b.input(floats(r, ir.BF16, 1, 2, 2, rel.HC, rel.Dim)), post, comb))
	})
}

// ropeTableInput is a real YaRN table [m, RopeDim/2, 2] as an f32 input.
func ropeTableInput(m int) *backends.Tensor {
	return RopeTable(ir.Attrs{"dim": i(rel.RopeDim), "base": rel.CompressRopeTheta, "factor": rel.RopeFactor,
		"original_seq_len": i(rel.OriginalSeqLen), "beta_fast": rel.BetaFast, "beta_slow": rel.BetaSlow}, m)
}

// attnTol is the golden rule with a floor: the reference sums q·k and P·V
// in float64; fp32 sums (the fast CPU kernels, a GPU's) differ by ~2^-24 of
// the terms, which an output near zero (a cancelling sum over the rows)
// shows as many of its own ulps.
var attnTol = Tol{Kind: BF16ULP, ULP: 1, Frac: 0.01, Floor: 1.0 / (1 << 10),
	Why: "golden unit-op rule (1 bf16 ulp; 2 in ≤ 1 % of elements); elements near zero within 2^-10 of the output's scale: the reference's float64 dot products against fp32 ones move the logits by ~2^-24, which flips bf16-rounded probabilities by 2^-8 of a term"}

func attention() {
	sel := exact(whySelect)
	for _, v := range []struct {
		name        string
		ratio, S, P int
	}{{"tokens", 1, 3, 5}, {"groups_prefill", 4, 9, 0}, {"groups_decode", 2, 1, 7}, {"groups_decode_none", 2, 1, 6}} {
		add("positions/"+v.name, sel, func(r *rand.Rand) *Instance {
			b := newBuilder(r, "positions", 1, v.S, 64, v.P)
			return b.out(b.add("positions", ir.Attrs{"ratio": i(v.ratio)}, b.tokens(100), b.startPos()))
		})
	}
	// RoPE at the released rotary width over the released head shapes,
	// with a real YaRN table and positions anywhere in it.
	for _, v := range []struct {
		name    string
		shape   []int
		inverse bool
	}{
		{"q", []int{1, 2, rel.Heads, rel.HeadDim}, false},
		{"inverse_out", []int{1, 2, rel.Heads, rel.HeadDim}, true},
		{"kv_batch2", []int{2, 3, rel.HeadDim}, false},
		{"indexer_q", []int{1, 2, rel.IdxHeads, rel.IdxDim}, false},
	} {
		add("rope/"+v.name, golden, func(r *rand.Rand) *Instance {
			const m = 64
			b := newBuilder(r, "rope", v.shape[0], v.shape[1], m, 0)
			x := b.input(floats(r, ir.BF16, 1, v.shape...))
			pos := b.input(ints(randInts(r, v.shape[1], m), v.shape[1]))
			a := ir.Attrs{"dim": i(rel.RopeDim)}
			if v.inverse {
				a["inverse"] = true
			}
			return b.out(b.add("rope", a, x, b.input(ropeTableInput(m)), pos))
		})
	}
	for _, v := range []struct {
		name string
		B, S int
		P    int
	}{{"prefill", 2, 5, 0}, {"prefill_beyond_window", 1, rel.Window + 3, 0}, {"decode", 2, 1, 200}, {"decode_ring_not_full", 1, 1, 3}} {
		add("window_idx/"+v.name, sel, func(r *rand.Rand) *Instance {
			b := newBuilder(r, "window_idx", v.B, v.S, 512, v.P)
			phase := "prefill"
			if v.P > 0 {
				phase = "decode"
			}
			return b.out(b.add("window_idx", ir.Attrs{"window": i(rel.Window), "phase": phase}, b.tokens(100), b.startPos()))
		})
	}
	for _, v := range []struct {
		name    string
		B, S, P int
	}{{"prefill", 1, 3, 0}, {"prefill_wraps", 1, rel.Window + 2, 0}, {"decode_batch2", 2, 1, 300}} {
		add("window_update/"+v.name, exact(whyMove), func(r *rand.Rand) *Instance {
			b := newBuilder(r, "window_update", v.B, v.S, 512, v.P)
			ring := b.state("ring", "window", floats(r, ir.BF16, 1, v.B, rel.Window, rel.HeadDim), "B", rel.Window, rel.HeadDim)
			kv := b.input(floats(r, ir.BF16, 1, v.B, v.S, rel.HeadDim), "B", "S", rel.HeadDim)
			return b.out(b.add("window_update", nil, ring, kv, b.startPos()))
		})
	}
	// Sparse attention at the released head count and width: window rows
	// and compressed rows, -1 entries, over more than two blocks of 64.
	add("sparse_attn/released", attnTol, func(r *rand.Rand) *Instance {
		const S = 2
		N := rel.Window + 32
		b := newBuilder(r, "sparse_attn", 1, S, 512, 0)
		q := b.input(floats(r, ir.BF16, 1, 1, S, rel.Heads, rel.HeadDim), "B", "S", rel.Heads, rel.HeadDim)
		kv := b.input(floats(r, ir.BF16, 1, 1, N, rel.HeadDim))
		sink := b.weight("sink", floatWeight(floats(r, ir.F32, 1, rel.Heads), "f32", ir.F32, "F32"))
		idx := b.input(attnIdx(r, 1, S, N, N, 0.1), "B", "S", N)
		return b.out(b.add("sparse_attn", ir.Attrs{"scale": math.Pow(float64(rel.HeadDim), -0.5)}, q, kv, sink, idx))
	})
	// The window's rows and the compressed cache's as two inputs (kv2), at
	// batch 2: what the model's compressed layers run.
	add("sparse_attn/window_and_compressed", attnTol, func(r *rand.Rand) *Instance {
		const B, S, H, D, NW, NC, T = 2, 2, 8, 64, 24, 45, 60
		b := newBuilder(r, "sparse_attn", B, S, 512, 0)
		sink := b.weight("sink", floatWeight(floats(r, ir.F32, 1, H), "f32", ir.F32, "F32"))
		return b.out(b.add("sparse_attn", ir.Attrs{"scale": math.Pow(D, -0.5)},
			b.input(floats(r, ir.BF16, 1, B, S, H, D)), b.input(floats(r, ir.BF16, 1, B, NW, D)), sink,
			b.input(attnIdx(r, B, S, NW+NC, T, 0.1)), b.input(floats(r, ir.BF16, 1, B, NC, D))))
	})
	add("sparse_attn/empty_rows", attnTol, func(r *rand.Rand) *Instance {
		const B, S, H, D, N, T = 2, 3, 4, 64, 70, 80
		b := newBuilder(r, "sparse_attn", B, S, 512, 0)
		idx := attnIdx(r, B, S, N, T, 0.2)
		for k := range T { // a query that sees no row: only the sink
			idx.I32[k] = -1
		}
		sink := b.weight("sink", floatWeight(floats(r, ir.F32, 1, H), "f32", ir.F32, "F32"))
		return b.out(b.add("sparse_attn", ir.Attrs{"scale": math.Pow(D, -0.5)},
			b.input(floats(r, ir.BF16, 1, B, S, H, D)), b.input(floats(r, ir.BF16, 1, B, N, D)), sink, b.input(idx)))
	})
	for _, v := range []struct {
		name     string
		ratio, S int
		P        int
	}{{"prefill_tail", 4, 6, 0}, {"prefill_whole_groups", 2, 6, 0}, {"decode", 4, 1, 9}} {
		add("group_state_update/"+v.name, exact(whyMove), func(r *rand.Rand) *Instance {
			b := newBuilder(r, "group_state_update", 1, v.S, 64, v.P)
			st := b.state("kv_state", "compressor_kv", floats(r, ir.F32, 1, 1, v.ratio, rel.HeadDim), "B", v.ratio, rel.HeadDim)
			x := b.input(floats(r, ir.F32, 1, 1, v.S, rel.HeadDim))
			return b.out(b.add("group_state_update", ir.Attrs{"ratio": i(v.ratio)}, st, x, b.startPos()))
		})
	}
	pool := Tol{Kind: Scaled, Rel: 1e-6, Why: "fp32 softmax weights of ≤ 4 slots: exp may differ by 1 fp32 ulp (torch's own expf does), a few 2^-24 of the output's scale"}
	for _, v := range []struct {
		name    string
		B, S, P int
	}{{"prefill_batch2", 2, 6, 0}, {"decode_completes_group", 1, 1, 5}, {"decode_no_group", 1, 1, 4}} {
		add("compressor_pool/"+v.name, pool, func(r *rand.Rand) *Instance {
			b := newBuilder(r, "compressor_pool", v.B, v.S, 64, v.P)
			c := b.input(floats(r, ir.F32, 1, v.B, v.S, rel.HeadDim))
			z := b.input(floats(r, ir.F32, 2, v.B, v.S, rel.HeadDim))
			kvst := b.state("kv_state", "compressor_kv", floats(r, ir.F32, 1, v.B, 2, rel.HeadDim))
			scst := b.state("score_state", "compressor_score", floats(r, ir.F32, 2, v.B, 2, rel.HeadDim))
			return b.out(b.add("compressor_pool", ir.Attrs{"ratio": i(2)}, c, z, kvst, scst, b.startPos()))
		})
	}
	add("cache_write/compressed", exact(whyMove), func(r *rand.Rand) *Instance {
		b := newBuilder(r, "cache_write", 1, 4, 32, 6)
		cache := b.state("ckv", "compress_kv", floats(r, ir.BF16, 1, 1, 16, rel.HeadDim), "B", "M/2", rel.HeadDim)
		rows := b.input(floats(r, ir.BF16, 1, 1, 2, rel.HeadDim))
		return b.out(b.add("cache_write", ir.Attrs{"ratio": i(2)}, cache, rows, b.startPos()))
	})
	for _, v := range []struct {
		name        string
		ratio, S, P int
	}{{"prefill_ratio2", 2, 5, 0}, {"decode_ratio2", 2, 1, 9}, {"decode_ratio1", 1, 1, 20}} {
		add("cache_read/"+v.name, exact(whyMove), func(r *rand.Rand) *Instance {
			b := newBuilder(r, "cache_read", 1, v.S, 32, v.P)
			cache := b.state("ckv", "compress_kv", floats(r, ir.BF16, 1, 1, 32/v.ratio, rel.HeadDim), "B", "M/"+itoa(v.ratio), rel.HeadDim)
			return b.out(b.add("cache_read", ir.Attrs{"ratio": i(v.ratio)}, cache, b.tokens(100), b.startPos()))
		})
	}
}

// attnIdx is an attention index list i32[B,S,T] of distinct rows of [0,n)
// per query, with about frac of the entries -1 (not yet written, hidden).
func attnIdx(r *rand.Rand, b, s, n, t int, frac float64) *backends.Tensor {
	x := &backends.Tensor{DType: ir.I32, Shape: []int{b, s, t}, I32: make([]int32, b*s*t)}
	for q := range b * s {
		perm := r.Perm(max(n, t))
		for k := range t {
			v := int32(perm[k])
			if int(v) >= n || r.Float64() < frac {
				v = -1
			}
			x.I32[q*t+k] = v
		}
	}
	return x
}

func itoa(v int) string { return strconv.Itoa(v) }

func indexer() {
	sel := exact(whySelect)
	add("index_score/released", golden, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "index_score", 2, 2, 128, 0)
		q := b.input(floats(r, ir.BF16, 1, 2, 2, rel.IdxHeads, rel.IdxDim), "B", "S", rel.IdxHeads, rel.IdxDim)
		k := b.input(floats(r, ir.BF16, 1, 2, 64, rel.IdxDim))
		w := b.input(floats(r, ir.BF16, 0.03, 2, 2, rel.IdxHeads), "B", "S", rel.IdxHeads)
		return b.out(b.add("index_score", nil, q, k, w))
	})
	for _, v := range []struct {
		name            string
		S, NC, P, ratio int
	}{{"prefill", 4, 8, 0, 2}, {"decode", 1, 5, 9, 2}} {
		add("index_mask/"+v.name, sel, func(r *rand.Rand) *Instance {
			b := newBuilder(r, "index_mask", 1, v.S, 64, v.P)
			return b.out(b.add("index_mask", ir.Attrs{"ratio": i(v.ratio)}, b.input(floats(r, ir.BF16, 1, 1, v.S, v.NC)), b.startPos()))
		})
	}
	// Candidate blocks at the released block size and top-k: a decode
	// query seeing 20000 compressed rows (2500 blocks, 2048 kept).
	add("candidate_blocks/released_decode", sel, func(r *rand.Rand) *Instance {
		const nc = 20000
		b := newBuilder(r, "candidate_blocks", 1, 1, nc, nc-1)
		s := &backends.Tensor{DType: ir.BF16, Shape: []int{1, 1, nc}, F32: distinctBF16(r, nc)}
		return b.out(b.add("candidate_blocks", ir.Attrs{"ratio": i(1), "topk_blocks": i(rel.CandTopK), "block": i(rel.CandBlock)}, b.input(s), b.startPos()))
	})
	add("candidate_blocks/prefill", sel, func(r *rand.Rand) *Instance {
		const S = 6
		b := newBuilder(r, "candidate_blocks", 1, S, 64, 0)
		s := &backends.Tensor{DType: ir.BF16, Shape: []int{1, S, S}, F32: distinctBF16(r, S*S)}
		for t := range S { // the causal mask of index_mask (ratio 1)
			for c := t + 1; c < S; c++ {
				s.F32[t*S+c] = float32(math.Inf(-1))
			}
		}
		return b.out(b.add("candidate_blocks", ir.Attrs{"ratio": i(1), "topk_blocks": i(2), "block": i(2)}, b.input(s), b.startPos()))
	})
	add("index_topk/released_decode", sel, func(r *rand.Rand) *Instance {
		const nc = 1000
		b := newBuilder(r, "index_topk", 1, 1, 2*nc, 2*nc-1)
		s := &backends.Tensor{DType: ir.BF16, Shape: []int{1, 1, nc}, F32: distinctBF16(r, nc)}
		win := b.input(floats(r, ir.BF16, 1, 1, rel.Window, rel.HeadDim), "B", rel.Window, rel.HeadDim)
		return b.out(b.add("index_topk", ir.Attrs{"ratio": i(2), "k": i(rel.IdxTopK)}, b.input(s), b.startPos(), win))
	})
	add("index_topk/prefill", sel, func(r *rand.Rand) *Instance {
		const S, nc = 5, 2
		b := newBuilder(r, "index_topk", 1, S, 64, 0)
		s := &backends.Tensor{DType: ir.BF16, Shape: []int{1, S, nc}, F32: distinctBF16(r, S*nc)}
		win := b.input(floats(r, ir.BF16, 1, 1, S, rel.HeadDim), "B", "S", rel.HeadDim)
		return b.out(b.add("index_topk", ir.Attrs{"ratio": i(2), "k": i(rel.IdxTopK)}, b.input(s), b.startPos(), win))
	})
}

// engramConsts are hash constants of the released layout: multipliers for
// n-grams up to EngNgram, a prime per head per n, offsets their running sum.
func engramConsts(r *rand.Rand) (mult, primes, offs []int64) {
	for range rel.EngNgram {
		mult = append(mult, r.Int64N(1<<40)*2+1)
	}
	seen := map[int64]bool{}
	var off int64
	for len(primes) < (rel.EngNgram-1)*rel.EngHeads {
		p := 10_000_000 + r.Int64N(7_000_000)
		if !isPrime(p) || seen[p] {
			continue
		}
		seen[p] = true
		primes, offs = append(primes, p), append(offs, off)
		off += p
	}
	return
}

func isPrime(n int64) bool {
	if n < 2 {
		return false
	}
	for d := int64(2); d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// history is an Engram history i64[B,M] of compressed ids with a dead
// token (-1, an image span) here and there.
func history(r *rand.Rand, b, m int) *backends.Tensor {
	h := randInts(r, b*m, int64(rel.EngCompressedVocab))
	for k := range h {
		if r.IntN(9) == 0 {
			h[k] = -1
		}
	}
	return ints(h, b, m)
}

func engram() {
	add("engram_hist_update/write", exact(whyMove), func(r *rand.Rand) *Instance {
		b := newBuilder(r, "engram_hist_update", 2, 3, 16, 4)
		h := b.state("hist", "engram_history", history(r, 2, 16), "B", "M")
		ids := b.input(history(r, 2, 3), "B", "S")
		return b.out(b.add("engram_hist_update", nil, h, ids, b.startPos()))
	})
	for _, v := range []struct {
		name string
		S, P int
	}{{"prefill", 5, 0}, {"decode", 1, 9}} {
		add("engram_hash/"+v.name, exact("int64 products, XOR and floor mod with wrapping arithmetic: one right answer"), func(r *rand.Rand) *Instance {
			b := newBuilder(r, "engram_hash", 2, v.S, 16, v.P)
			mult, primes, offs := engramConsts(r)
			h := b.state("hist", "engram_history", history(r, 2, 16), "B", "M")
			pad := b.g.Source("const", ir.T(ir.I64, 1), ir.Attrs{"ints": []int64{2}})
			return b.out(b.add("engram_hash", ir.Attrs{"multipliers": mult, "primes": primes, "offsets": offs, "heads": i(rel.EngHeads)},
				h, b.tokens(100), b.startPos(), pad))
		})
	}
	add("engram_lookup/released", exact("e4m3 · e8m0 is exact in fp32, then one bf16 rounding"), func(r *rand.Rand) *Instance {
		const rows = 1000
		b := newBuilder(r, "engram_lookup", 1, 2, 16, 0)
		tab := b.weight("engram.table", fp8RowWeight(r, rows, rel.EngDim))
		cols := (rel.EngNgram - 1) * rel.EngHeads
		return b.out(b.add("engram_lookup", nil, tab, b.input(ints(randInts(r, 2*cols, rows), 1, 2, cols))))
	})
	add("engram_gate/released", Tol{Kind: BF16ULP, ULP: 1, Frac: 0.01,
		Why: "the reference sums Σh², Σkey² and the dot in float64; a backend's fp32 sums move the gate by ~1e-7 relative, which may cross one bf16 rounding boundary"},
		func(r *rand.Rand) *Instance {
			b := newBuilder(r, "engram_gate", 1, 2, 16, 0)
			h := b.input(floats(r, ir.BF16, 1, 1, 2, rel.HC, rel.Dim), "B", "S", rel.HC, rel.Dim)
			key := b.input(asF32(floats(r, ir.BF16, 1, 1, 2, rel.HC, rel.Dim)), "B", "S", rel.HC, rel.Dim)
			val := b.input(floats(r, ir.BF16, 1, 1, 2, rel.Dim), "B", "S", rel.Dim)
			om := floats(r, ir.F32, 1, rel.HC, rel.Dim)
			for k, v := range om.F32 { // q_weight·k_weight of two bf16 weights
				om.F32[k] = numfmt.BF16Round(v) * numfmt.BF16Round(float32(r.NormFloat64()))
			}
			return b.out(b.add("engram_gate", ir.Attrs{"eps": rel.NormEps}, h, key, val, b.input(om)))
		})
}

func fused() {
	add("probe/view", exact(whyMove), func(r *rand.Rand) *Instance {
		b := newBuilder(r, "probe", 1, 2, 8, 0)
		return b.out(b.add("probe", ir.Attrs{"name": "x"}, b.input(floats(r, ir.BF16, 1, 1, 2, rel.Dim), "B", "S", rel.Dim)))
	})
	// Traced: the probe's value is read back; forced: replaced (teacher
	// forcing), and its reader must see the replacement.
	for _, force := range []bool{false, true} {
		name := map[bool]string{false: "probe/traced", true: "probe/forced"}[force]
		add(name, exact(whyMove), func(r *rand.Rand) *Instance {
			b := newBuilder(r, "probe", 1, 2, 8, 0)
			b.in.Trace = true
			b.in.Forced = map[string]*backends.Tensor{"x2": floats(r, ir.BF16, 1, 1, 2, rel.Dim)}
			x := b.add("mul_scalar", ir.Attrs{"value": 2.0}, b.input(floats(r, ir.BF16, 1, 1, 2, rel.Dim), "B", "S", rel.Dim))
			p := b.add("probe", ir.Attrs{"name": "x2", "force": force}, x)
			return b.out(b.add("mul_scalar", ir.Attrs{"value": 0.5}, p))
		})
	}
	add("hc_mix/released", reorder32, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "hc_mix", 1, 2, 8, 0)
		mix := (2 + rel.HC) * rel.HC
		fn := b.weight("hc_fn", floatWeight(floats(r, ir.F32, 0.007, mix, rel.HC*rel.Dim), "f32", ir.F32, "F32"))
		return b.out(b.add("hc_mix", ir.Attrs{"eps": rel.NormEps}, b.input(floats(r, ir.BF16, 1, 1, 2, rel.HC, rel.Dim), "B", "S", rel.HC, rel.Dim), fn))
	})
	add("hc_split_sinkhorn/released", Tol{Kind: RelAbs, Rel: 1e-6, Abs: 1e-6, Why: "golden unit-op rule for hc_split_sinkhorn (1e-6 relative / 1e-6 absolute): sigmoid, exp and 20 normalisations in fp32"},
		func(r *rand.Rand) *Instance {
			b := newBuilder(r, "hc_split_sinkhorn", 1, 2, 8, 0)
			mix := (2 + rel.HC) * rel.HC
			scale := b.weight("hc_scale", floatWeight(uniform(r, ir.F32, 0.5, 1.5, 3), "f32", ir.F32, "F32"))
			base := b.weight("hc_base", floatWeight(floats(r, ir.F32, 0.5, mix), "f32", ir.F32, "F32"))
			m := b.input(floats(r, ir.F32, 1, 1, 2, mix), "B", "S", mix)
			return b.out(b.add("hc_split_sinkhorn", ir.Attrs{"hc": i(rel.HC), "iters": i(rel.SinkhornIters), "eps": rel.HCEps}, m, scale, base))
		})
	add("swiglu_clamp/routed", libm16, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "swiglu_clamp", 3, 1, 8, 0)
		g := b.input(asF32(floats(r, ir.BF16, 6, 3, rel.Active, rel.Inter)))
		u := b.input(asF32(floats(r, ir.BF16, 6, 3, rel.Active, rel.Inter)))
		w := b.input(uniform(r, ir.F32, 0, 1, 3, rel.Active, 1))
		return b.out(b.add("swiglu_clamp", ir.Attrs{"limit": rel.SwiGLULimit}, g, u, w))
	})
	add("swiglu_clamp/shared", libm16, func(r *rand.Rand) *Instance {
		b := newBuilder(r, "swiglu_clamp", 1, 2, 8, 0)
		g := b.input(asF32(floats(r, ir.BF16, 6, 1, 2, rel.Inter)))
		u := b.input(asF32(floats(r, ir.BF16, 6, 1, 2, rel.Inter)))
		return b.out(b.add("swiglu_clamp", ir.Attrs{"limit": rel.SwiGLULimit}, g, u))
	})
}
