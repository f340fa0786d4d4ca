package ir

import (
	"fmt"
	"strconv"
)

// Flags describe how passes and schedulers may treat an op.
type Flags uint16

// Op flags.
const (
	Source      Flags = 1 << iota // no arguments; the node's type is declared
	Elementwise                   // output element i depends only on input element i
	Reduction                     // reduces along an axis
	SideEffect                    // must not be removed even when unused (probes)
	StateUpdate                   // argument 0 is a state value; the result is its new version
	Fused                         // produced by a fusion pass, never by the model builder
)

// AttrKind is the type of an attribute value.
type AttrKind uint8

// Attribute kinds.
const (
	AInt AttrKind = iota
	AFloat
	AString
	ABool
	AInts
	AFloats
)

// AttrSpec declares one attribute of an op.
type AttrSpec struct {
	Name     string
	Kind     AttrKind
	Required bool
	// Infinite allows ±Inf in a float attribute whose op gives it a
	// meaning (a clamp bound); NaN is never allowed, and every other float
	// attribute (constants included) must be finite.
	Infinite bool
}

// OpInfo is one row of the op table.
type OpInfo struct {
	Name    string
	MinArgs int
	MaxArgs int // -1: variadic
	Attrs   []AttrSpec
	Flags   Flags
	// Infer returns the result type from the (already typed) arguments and
	// attributes, or an error naming what is wrong. For Source ops it checks
	// the declared type and returns it.
	Infer func(n *Node) (Type, error)
	// Doc states the semantics, including rounding points.
	Doc string
}

// Has reports whether the op has all flags f.
func (o *OpInfo) Has(f Flags) bool { return o.Flags&f == f }

// ScheduleAttrs are attributes any non-source op may carry; scheduling
// passes set them and executors read them. buf is the activation buffer
// slot the node's result is written to (see passes/assign_buffers.go);
// rows is the number of trailing positions of the prompt a call that
// needs only the last position's logits computes the node on (see
// passes/bounded_rows.go and RowOp).
var ScheduleAttrs = []AttrSpec{opt("buf", AInt), opt("rows", AInt)}

// Ops is the op table, keyed by name.
var Ops = map[string]*OpInfo{}

func req(name string, k AttrKind) AttrSpec { return AttrSpec{Name: name, Kind: k, Required: true} }
func opt(name string, k AttrKind) AttrSpec { return AttrSpec{Name: name, Kind: k} }

// optBound is an optional float bound that may be ±Inf.
func optBound(name string) AttrSpec { return AttrSpec{Name: name, Kind: AFloat, Infinite: true} }

func def(name string, minArgs, maxArgs int, flags Flags, attrs []AttrSpec, infer func(n *Node) (Type, error), doc string) {
	Ops[name] = &OpInfo{Name: name, MinArgs: minArgs, MaxArgs: maxArgs, Attrs: attrs, Flags: flags, Infer: infer, Doc: doc}
}

// ---- rule helpers ----------------------------------------------------------

func errf(format string, a ...any) error { return fmt.Errorf(format, a...) }

func declared(n *Node) (Type, error) {
	if n.Type.DType == Invalid {
		return Type{}, errf("source needs a declared type")
	}
	return n.Type, nil
}

func sameAsArg0(n *Node) (Type, error) { return n.Args[0].Type, nil }

func floatArg(n *Node, i int) error {
	if !n.Args[i].Type.DType.IsFloat() {
		return errf("argument %d: want a float type, got %s", i, n.Args[i].Type)
	}
	return nil
}

func unaryFloat(n *Node) (Type, error) {
	if err := floatArg(n, 0); err != nil {
		return Type{}, err
	}
	return n.Args[0].Type, nil
}

func wantDType(n *Node, i int, ds ...DType) error {
	for _, d := range ds {
		if n.Args[i].Type.DType == d {
			return nil
		}
	}
	return errf("argument %d: dtype %s not allowed (want one of %v)", i, n.Args[i].Type.DType, ds)
}

func wantRank(n *Node, i, r int) error {
	if got := n.Args[i].Type.Shape.Rank(); got != r {
		return errf("argument %d: want rank %d, got %s", i, r, n.Args[i].Type)
	}
	return nil
}

func dimEq(a, b Dim) bool { return a == b }

// Broadcast applies numpy broadcasting to two shapes.
func Broadcast(a, b Shape) (Shape, error) {
	n := max(len(a), len(b))
	out := make(Shape, n)
	for i := 0; i < n; i++ {
		da, db := C(1), C(1)
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case dimEq(da, db):
			out[i] = da
		case da == C(1):
			out[i] = db
		case db == C(1):
			out[i] = da
		default:
			return nil, errf("shapes %s and %s do not broadcast", a, b)
		}
	}
	return out, nil
}

func binary(n *Node) (Type, error) {
	a, b := n.Args[0].Type, n.Args[1].Type
	if !a.DType.IsFloat() || a.DType != b.DType {
		return Type{}, errf("operands must share a float dtype, got %s and %s", a, b)
	}
	s, err := Broadcast(a.Shape, b.Shape)
	if err != nil {
		return Type{}, err
	}
	return Type{a.DType, s}, nil
}

func axisOf(n *Node, r int) (int, error) {
	ax := int(n.Attrs.Int("axis", -1))
	if ax < 0 {
		ax += r
	}
	if ax < 0 || ax >= r {
		return 0, errf("axis %d out of range for rank %d", n.Attrs.Int("axis", -1), r)
	}
	return ax, nil
}

func reduce(n *Node) (Type, error) {
	t := n.Args[0].Type
	if !t.DType.IsFloat() {
		return Type{}, errf("want a float type, got %s", t)
	}
	ax, err := axisOf(n, t.Shape.Rank())
	if err != nil {
		return Type{}, err
	}
	s := t.Shape.Clone()
	if n.Attrs.Bool("keepdim", true) {
		s[ax] = C(1)
	} else {
		s = append(s[:ax], s[ax+1:]...)
	}
	return Type{t.DType, s}, nil
}

// ---- the table -------------------------------------------------------------

func init() {
	// Sources.
	def("input", 0, 0, Source, []AttrSpec{req("name", AString)}, declared,
		"A run-time input: `tokens` i64[B,S] or `start_pos` i64[] (the absolute position of the first token).")
	def("weight", 0, 0, Source, []AttrSpec{req("name", AString), req("format", AString), opt("layer", AInt), opt("component", AString), opt("experts", AInt)}, weightRule,
		"A named checkpoint tensor. format: fp8 (e4m3 [out,in] + e8m0 scale [ceil(out/32),ceil(in/32)]), fp4 (e2m1 packed two per byte along in, low nibble first, + e8m0 scale [out,in/32]), fp8row (e4m3 rows + e8m0 per row per 32 columns), bf16, f32 (stored bf16 or f32, used at the declared dtype), i64. experts=E stacks tensors named with {e} = 0..E-1 along a leading axis. The type is the logical element type and shape.")
	def("const", 0, 0, Source, []AttrSpec{opt("ints", AInts), opt("floats", AFloats)}, constRule,
		"A small constant; values row-major, length equal to the element count.")
	def("state", 0, 0, Source, []AttrSpec{req("name", AString), req("kind", AString)}, declared,
		"Persistent state kept between calls (window ring, compressor state, compressed KV, index keys, Engram history). Sized by the run-time batch B and maximum length M. Read by using the value; changed only by StateUpdate ops, whose result is the new version.")
	def("rope_table", 0, 0, Source, []AttrSpec{req("dim", AInt), req("base", AFloat), req("factor", AFloat), req("original_seq_len", AInt), req("beta_fast", AFloat), req("beta_slow", AFloat)}, ropeTableRule,
		"RoPE (cos, sin) table f32[M, dim/2, 2] as precompute_freqs_cis: f_i = base^(-2i/dim) in fp32, YaRN ramp when original_seq_len > 0, angle t*f_i in fp32.")

	// Elementwise.
	def("cast", 1, 1, Elementwise, []AttrSpec{req("to", AString)}, castRule,
		"Convert to dtype `to`; to bf16/f16 rounds to nearest even (NaN kept), to f32 is exact.")
	for _, u := range []struct{ name, doc string }{
		{"sigmoid", "1/(1+exp(-x)) in fp32, result in x's dtype."},
		{"silu", "x*sigmoid(x) in fp32 (torch F.silu), result in x's dtype."},
		{"rsqrt", "1/sqrt(x) in fp32."},
		{"sqrt", "sqrt(x) in fp32."},
		{"softplus", "log1p(exp(x)), and x itself where x > 20 (torch threshold)."},
		{"exp", "exp(x) in fp32."},
		{"relu", "max(x, 0)."},
	} {
		def(u.name, 1, 1, Elementwise, nil, unaryFloat, u.doc)
	}
	def("clamp", 1, 1, Elementwise, []AttrSpec{optBound("lo"), optBound("hi")}, unaryFloat,
		"min(max(x, lo), hi); an absent bound is not applied (clamp with only hi is torch's clamp(max=hi)).")
	def("add_scalar", 1, 1, Elementwise, []AttrSpec{req("value", AFloat)}, unaryFloat, "x + value (value rounded to fp32).")
	def("mul_scalar", 1, 1, Elementwise, []AttrSpec{req("value", AFloat)}, unaryFloat, "x * value (value rounded to fp32).")
	for _, b := range []string{"add", "sub", "mul", "div"} {
		def(b, 2, 2, Elementwise, nil, binary, "Elementwise "+b+" with numpy broadcasting; fp32 arithmetic, result rounded to the operands' dtype.")
	}
	def("mask_fill", 2, 2, Elementwise, nil, maskFillRule, "x where mask != 0, -inf elsewhere (mask u8 of x's shape).")
	def("act_quant", 1, 1, Elementwise, []AttrSpec{req("block", AInt)}, actQuantRule,
		"fp8 fake quantisation (kernel act_quant, ue8m0): per block along the last axis a = max(max|x|,1e-4), s = 2^ceil(log2(a/448)) on fp32 bits, q = e4m3_RNE(clamp(x/s,±448)), result bf16(q*s). Input and output bf16.")
	def("fp4_quant", 1, 1, Elementwise, []AttrSpec{req("block", AInt), req("scale", AString)}, actQuantRule,
		"fp4 fake quantisation (fp4_act_quant in place): scale e8m0 (block 32: s = 2^ceil(log2(max(a,6*2^-126)/6))) or e4m3 (block 16: s = e4m3_RNE_satfinite(max(a,6*2^-9)/6)); q = e2m1_RNE(clamp(x/s,±6)); result bf16(q*s).")

	// Reductions.
	def("mean_sq", 1, 1, Reduction, []AttrSpec{opt("axis", AInt), opt("keepdim", ABool)}, reduce, "mean(x²) along axis in fp32.")
	def("sum", 1, 1, Reduction, []AttrSpec{opt("axis", AInt), opt("keepdim", ABool)}, reduce, "Sum along axis in fp32 (sequential), result in x's dtype.")
	def("softmax", 1, 1, Reduction, []AttrSpec{opt("axis", AInt)}, unaryFloat, "exp(x-max)/sum along axis, fp32.")

	// Shape.
	def("reshape", 1, 1, 0, []AttrSpec{req("shape", AString)}, reshapeRule, "Same elements, new shape (row-major); `shape` is the text of the new shape.")
	def("slice", 1, 1, 0, []AttrSpec{req("axis", AInt), req("start", AInt), req("end", AInt)}, sliceRule, "Elements start..end-1 along axis.")
	def("last", 1, 1, 0, []AttrSpec{req("axis", AInt)}, lastRule, "The last element along axis, kept as a dim of 1 (a prompt's last position, the only one whose logits generation reads).")
	def("concat", 1, -1, 0, []AttrSpec{req("axis", AInt)}, concatRule, "Concatenation along axis; other dims equal.")
	def("expand", 1, 1, 0, []AttrSpec{req("axis", AInt), req("n", AInt)}, expandRule, "Insert a new axis of size n at axis, repeating x (hc expansion to the copies).")

	// Gathers and selections.
	def("embed", 2, 2, 0, nil, embedRule, "Row gather: table[V,D] at i64 ids[...] → table dtype [..., D]; ids out of range are an error.")
	def("token_map", 2, 2, 0, nil, tokenMapRule, "map[ids] for a 1-D i64 map: the Engram compressed-token map.")
	def("gather", 2, 2, 0, nil, gatherRule, "out[n,j] = x[n, idx[n,j]] for x [N,E], idx i64[N,k].")
	def("topk_idx", 1, 1, 0, []AttrSpec{req("k", AInt)}, topkIdxRule, "Indices of the k largest values per row, sorted by value descending (ties: lower index first), i64[N,k].")

	// Linear algebra.
	def("matmul", 2, 2, 0, nil, matmulRule, "y = x · wᵀ (w [N,K]); fp32 accumulation in K order; result in x's dtype (bf16 rounds once).")
	def("matmul_fp8", 2, 2, 0, nil, matmulQuantRule, "fp8_gemm: x holds act_quant'ed bf16 values, w e4m3 [N,K] with e8m0 32x32 block scales; per 32-block fp32 partial sums scaled and accumulated in K order; bf16 result.")
	def("matmul_fp4", 2, 2, 0, nil, matmulQuantRule, "fp4_gemm: as matmul_fp8 with e2m1 weights and e8m0 scales per row per 32 along K.")
	def("grouped_matmul", 2, 2, 0, []AttrSpec{req("groups", AInt)}, groupedRule, "Grouped output LoRA: x [...,G*dg], w [G*R, dg]; u[g*R+r] = Σ_d x[g*dg+d]·w[g*R+r,d], fp32 accumulate, bf16 result.")
	def("expert_matmul", 3, 3, 0, nil, expertMatmulRule, "Routed-expert GEMM: x [N,K] (shared by the k slots) or [N,k,K], w [E,O,K] fp4/fp8 quantised, idx i64[N,k]: y[n,j] = x[n(,j)] · w[idx[n,j]]ᵀ as matmul_fp4/fp8, bf16 [N,k,O]. Only chosen experts are read.")
	def("moe_combine", 2, 2, 0, nil, moeCombineRule, "Σ_j y[n,j] in fp32, adding the slots in increasing expert id order (the reference loops over experts), f32 [N,D].")

	// Normalisation and hyper-connections.
	def("rmsnorm", 2, 2, 0, []AttrSpec{req("eps", AFloat)}, rmsnormRule, "w ⊙ (x·rsqrt(mean(x²)+eps)) in fp32, rounded once to x's dtype.")
	def("hc_pre", 2, 2, 0, nil, hcPreRule, "Collapse the copies: Σ_i pre_i·h_i in fp32 → bf16 [..., D].")
	def("hc_post", 4, 4, 0, nil, hcPostRule, "out_j = post_j·y + Σ_i comb_ij·res_i in fp32 → bf16 [..., H, D].")

	// Positions and RoPE.
	def("positions", 2, 2, 0, []AttrSpec{req("ratio", AInt)}, positionsRule, "Absolute positions of this call: ratio 1 → start_pos+t for the S tokens (i64[S]); ratio r > 1 → g·r for every compressed group completed in this call (i64[(P+S)/r-P/r]). In a ragged call the cpu kernels also take start_pos as i64[B] (backends.RegisterRowPositions): ratio 1 then gives i64[B,S], row b from start_pos[b].")
	def("rope", 3, 3, 0, []AttrSpec{req("dim", AInt), opt("inverse", ABool)}, ropeRule, "Rotate the last `dim` channels (interleaved pairs) of x [B,T,...,W] by table[pos[t]] (conjugate when inverse), fp32 complex product, result in x's dtype. In a ragged call (backends.Runner.RunRows) the host kernels also take pos as i64[B,T], row b rotated by pos[b,t].")

	// Attention.
	def("window_idx", 2, 2, 0, []AttrSpec{req("window", AInt), req("phase", AString)}, windowIdxRule, "Window part of the attention index list, i32[B,S,T]: prefill (T = min(S,window)) query t sees chunk rows max(0,t-window+1)..t; decode (T = window) the ring slots oldest first, slots not yet written -1; chunk (T = window, any start_pos) positions max(0,p-window+1)..p of query p ascending over [ring as before the call ; the chunk's rows], -1 at the end (prefill's layout). In a ragged call the cpu kernels also take start_pos as i64[B], row b at start_pos[b].")
	def("window_update", 3, 3, StateUpdate, nil, windowUpdateRule, "Write kv rows into the ring at slot = position mod window (the last min(S,window) rows of the call). In a ragged call the cpu kernels also take start_pos as i64[B], row b at start_pos[b].")
	def("sparse_attn", 4, 5, 0, []AttrSpec{req("scale", AFloat)}, sparseAttnRule, "sparse_attn(q [B,S,H,D], kv [B,N,D], sink f32[H], idx i32[B,S,T] [, kv2 [B,N2,D]]): softmax over the listed rows with the sink in the denominator; online over blocks of 64, p rounded to bf16 before P·V; -1 entries skipped; bf16 result. With kv2, idx addresses kv's rows then kv2's (N+j is kv2's row j), as if they were concatenated along axis 1, without the copy.")
	def("group_state_update", 3, 3, StateUpdate, []AttrSpec{req("ratio", AInt)}, groupStateRule, "Compressor state [B,r,D]: prefill keeps the incomplete tail group (slot t mod r), decode writes slot start_pos mod r, a chunk (S > 1 at start_pos > 0) keeps its incomplete tail group (slot p mod r).")
	def("compressor_pool", 5, 5, 0, []AttrSpec{req("ratio", AInt)}, compressorPoolRule, "Gated pooling of complete groups: pooled_g[c] = Σ_j c_j[c]·softmax_j(z[c]) over the r tokens of the group (prefill from the chunk; at start_pos > 0 a token before start_pos from its state slot, the others from c, z: decode passes the updated state, a chunk the state as the previous call left it), f32 [B,G,D].")
	def("cache_write", 3, 3, StateUpdate, []AttrSpec{req("ratio", AInt)}, cacheWriteRule, "Write rows [B,G,D] into a cache [B,M/r,D] at row start_pos div r.")
	def("cache_read", 3, 3, 0, []AttrSpec{req("ratio", AInt)}, cacheReadRule, "The first (start_pos+S) div r rows of a cache.")
	def("index_score", 3, 3, 0, nil, indexScoreRule, "score[b,t,s] = Σ_h bf16(relu(bf16(q[b,t,h]·k[b,s])) · w[b,t,h]), head sum in fp32 rounded to bf16 (the reference's bf16 einsum).")
	def("index_mask", 2, 2, 0, []AttrSpec{req("ratio", AInt)}, indexMaskRule, "Causal mask of index scores: -inf where s ≥ ⌊(start_pos+t+1)/r⌋ (decode: unchanged).")
	def("candidate_blocks", 2, 2, 0, []AttrSpec{req("ratio", AInt), req("topk_blocks", AInt), req("block", AInt)}, candidateRule, "select_candidate_blocks: block max over `block` positions, newest reachable block pinned to +inf, top blocks kept (−inf dropped), expanded to a u8 mask [B,S,NC].")
	def("index_topk", 3, 3, 0, []AttrSpec{req("ratio", AInt), req("k", AInt)}, indexTopkRule, "Top min(k,NC) compressed positions per query, ascending; entries not visible (≥ ⌊(start_pos+t+1)/r⌋) become -1; others are offset by the window row count of arg 2 (the window kv's row axis).")

	// Engram.
	def("engram_hist_update", 3, 3, StateUpdate, nil, engramHistRule, "Write the mapped ids of this call into the history i64[B,M] at start_pos. In a ragged call the cpu kernels also take start_pos as i64[B], row b at start_pos[b].")
	def("engram_hash", 4, 4, 0, []AttrSpec{req("multipliers", AInts), req("primes", AInts), req("offsets", AInts), req("heads", AInt)}, engramHashRule, "NgramHashState for one Engram layer over (history i64[B,M], tokens i64[B,S], start_pos, pad i64[1]): for n = 2..len(multipliers) XOR-rolled products of the last n history ids (the pad — the mapped id of engram_pad_id — where blocked), row = (roll mod prime) + offset, i64[B,S,(n_max-1)*heads]. In a ragged call the cpu kernels also take start_pos as i64[B], row b at start_pos[b].")
	def("engram_lookup", 2, 2, 0, nil, engramLookupRule, "Rows of an fp8row table dequantised to bf16 and flattened: [B,S,C] → bf16[B,S,C*W].")
	def("engram_gate", 4, 4, 0, []AttrSpec{req("eps", AFloat)}, engramGateRule, "h_j + σ(signed sqrt(dot_j))·value with dot_j = Σ_d h_j·ω_j·key_j·rsqrt(ms(h_j)+eps)·rsqrt(ms(key_j)+eps)/sqrt(D) (spec 4.11), bf16 [B,S,H,D].")

	// Observation.
	def("probe", 1, 1, SideEffect, []AttrSpec{req("name", AString), opt("force", ABool)}, sameAsArg0, "Identity that names a value for traces; with force, a teacher-forcing run may replace the value by the trace file's tensor of that name.")

	// Fused ops (made by passes).
	def("hc_mix", 2, 2, Fused, []AttrSpec{req("eps", AFloat)}, hcMixRule, "Fused mix projection: m = (flat(h)·fnᵀ)·rsqrt(mean(flat(h)²)+eps), f32 [..., mix].")
	def("hc_split_sinkhorn", 3, 3, Fused, []AttrSpec{req("hc", AInt), req("iters", AInt), req("eps", AFloat)}, sinkhornRule, "Fused hc_split_sinkhorn: from mixes [...,(2+hc)hc] the packed [pre | post | comb] f32 [..., (2+hc)hc].")
	def("swiglu_clamp", 2, 3, Fused, []AttrSpec{req("limit", AFloat)}, swigluRule, "bf16(silu(min(g,L))·clamp(u,±L)·w) in fp32, w the optional routing weight [..,1].")
}

// ---- rules -----------------------------------------------------------------

func weightRule(n *Node) (Type, error) {
	t, err := declared(n)
	if err != nil {
		return t, err
	}
	switch f := n.Attrs.Str("format", ""); f {
	case "fp8", "fp8row":
		// An fp8 tensor used as bf16/f32 is dequantised when it is bound
		// (attn.wo_a, as the reference's converter does).
		if t.DType != F8E4M3 && !(f == "fp8" && t.DType.IsFloat()) {
			return t, errf("format %s needs dtype f8e4m3, got %s", f, t.DType)
		}
	case "fp4":
		if t.DType != FP4E2M1 {
			return t, errf("format fp4 needs dtype fp4e2m1, got %s", t.DType)
		}
	case "bf16", "f32":
		if !t.DType.IsFloat() {
			return t, errf("format %s needs a float dtype, got %s", f, t.DType)
		}
	case "i64":
		if t.DType != I64 {
			return t, errf("format i64 needs dtype i64")
		}
	default:
		return t, errf("unknown weight format %q", f)
	}
	if _, ok := t.Shape.NumElements(); !ok {
		return t, errf("weight shape %s must be constant", t.Shape)
	}
	return t, nil
}

func constRule(n *Node) (Type, error) {
	t, err := declared(n)
	if err != nil {
		return t, err
	}
	ne, ok := t.Shape.NumElements()
	if !ok {
		return t, errf("const shape must be constant")
	}
	got := int64(len(n.Attrs.Ints("ints")) + len(n.Attrs.Floats("floats")))
	if got != ne {
		return t, errf("const has %d values, shape %s needs %d", got, t.Shape, ne)
	}
	return t, nil
}

func castRule(n *Node) (Type, error) {
	d, err := ParseDType(n.Attrs.Str("to", ""))
	if err != nil {
		return Type{}, err
	}
	if !d.IsFloat() || !n.Args[0].Type.DType.IsFloat() {
		return Type{}, errf("cast is between float types, got %s to %s", n.Args[0].Type.DType, d)
	}
	return Type{d, n.Args[0].Type.Shape}, nil
}

func maskFillRule(n *Node) (Type, error) {
	if err := floatArg(n, 0); err != nil {
		return Type{}, err
	}
	if err := wantDType(n, 1, U8, Bool); err != nil {
		return Type{}, err
	}
	if !n.Args[0].Type.Shape.Equal(n.Args[1].Type.Shape) {
		return Type{}, errf("mask shape %s differs from %s", n.Args[1].Type.Shape, n.Args[0].Type.Shape)
	}
	return n.Args[0].Type, nil
}

func actQuantRule(n *Node) (Type, error) {
	if err := wantDType(n, 0, BF16); err != nil {
		return Type{}, err
	}
	b := n.Attrs.Int("block", 0)
	if b <= 0 {
		return Type{}, errf("block must be positive")
	}
	if l := n.Args[0].Type.Shape.Last(); l.IsConst() && l.N%b != 0 {
		return Type{}, errf("last dim %d is not a multiple of block %d", l.N, b)
	}
	if s := n.Attrs.Str("scale", "e8m0"); s != "e8m0" && s != "e4m3" {
		return Type{}, errf("scale must be e8m0 or e4m3, got %q", s)
	}
	return n.Args[0].Type, nil
}

func reshapeRule(n *Node) (Type, error) {
	s, err := ParseShape(n.Attrs.Str("shape", ""))
	if err != nil {
		return Type{}, err
	}
	in := n.Args[0].Type.Shape
	// Constant trailing parts must agree in element count: compare the
	// products of the constant dims, and the multiset of symbols.
	prod := func(sh Shape) (int64, map[string]int) {
		p, syms := int64(1), map[string]int{}
		for _, d := range sh {
			if d.IsConst() {
				p *= d.N
			} else {
				syms[d.Sym]++
			}
		}
		return p, syms
	}
	pi, si := prod(in)
	po, so := prod(s)
	// With symbols on both sides only the constant parts can be checked
	// ("B*S" may stand for B and S).
	if pi != po || (len(si) == 0) != (len(so) == 0) {
		return Type{}, errf("cannot reshape %s to %s", in, s)
	}
	return Type{n.Args[0].Type.DType, s}, nil
}

func sliceRule(n *Node) (Type, error) {
	t := n.Args[0].Type
	ax, err := axisOf(n, t.Shape.Rank())
	if err != nil {
		return Type{}, err
	}
	st, en := n.Attrs.Int("start", 0), n.Attrs.Int("end", 0)
	d := t.Shape[ax]
	if st < 0 || en <= st || (d.IsConst() && en > d.N) {
		return Type{}, errf("slice %d:%d out of range for dim %s", st, en, d)
	}
	s := t.Shape.Clone()
	s[ax] = C(en - st)
	return Type{t.DType, s}, nil
}

func lastRule(n *Node) (Type, error) {
	t := n.Args[0].Type
	ax, err := axisOf(n, t.Shape.Rank())
	if err != nil {
		return Type{}, err
	}
	if d := t.Shape[ax]; d.IsConst() && d.N < 1 {
		return Type{}, errf("last of an empty dim %s", d)
	}
	s := t.Shape.Clone()
	s[ax] = C(1)
	return Type{t.DType, s}, nil
}

func concatRule(n *Node) (Type, error) {
	t := n.Args[0].Type
	ax, err := axisOf(n, t.Shape.Rank())
	if err != nil {
		return Type{}, err
	}
	s := t.Shape.Clone()
	var syms []string
	total := int64(0)
	for i, a := range n.Args {
		at := a.Type
		if at.DType != t.DType || at.Shape.Rank() != t.Shape.Rank() {
			return Type{}, errf("argument %d: %s does not match %s", i, at, t)
		}
		for j := range s {
			if j != ax && at.Shape[j] != s[j] {
				return Type{}, errf("argument %d: dim %d is %s, want %s", i, j, at.Shape[j], s[j])
			}
		}
		if d := at.Shape[ax]; d.IsConst() {
			total += d.N
		} else {
			syms = append(syms, d.Sym)
		}
	}
	if len(syms) == 0 {
		s[ax] = C(total)
	} else {
		e := ""
		for i, x := range syms {
			if i > 0 {
				e += "+"
			}
			e += x
		}
		if total > 0 {
			e += "+" + strconv.FormatInt(total, 10)
		}
		s[ax] = Sym(e)
	}
	return Type{t.DType, s}, nil
}

func expandRule(n *Node) (Type, error) {
	t := n.Args[0].Type
	ax := int(n.Attrs.Int("axis", 0))
	k := n.Attrs.Int("n", 0)
	if ax < 0 || ax > t.Shape.Rank() || k <= 0 {
		return Type{}, errf("bad expand axis %d n %d for %s", ax, k, t)
	}
	s := append(t.Shape[:ax:ax], append(Shape{C(k)}, t.Shape[ax:]...)...)
	return Type{t.DType, s}, nil
}

func embedRule(n *Node) (Type, error) {
	if err := wantRank(n, 0, 2); err != nil {
		return Type{}, err
	}
	if err := wantDType(n, 1, I64); err != nil {
		return Type{}, err
	}
	s := append(n.Args[1].Type.Shape.Clone(), n.Args[0].Type.Shape[1])
	return Type{n.Args[0].Type.DType, s}, nil
}

func tokenMapRule(n *Node) (Type, error) {
	if err := wantRank(n, 0, 1); err != nil {
		return Type{}, err
	}
	if err := wantDType(n, 0, I64); err != nil {
		return Type{}, err
	}
	if err := wantDType(n, 1, I64); err != nil {
		return Type{}, err
	}
	return Type{I64, n.Args[1].Type.Shape}, nil
}

func gatherRule(n *Node) (Type, error) {
	if err := wantRank(n, 0, 2); err != nil {
		return Type{}, err
	}
	if err := wantRank(n, 1, 2); err != nil {
		return Type{}, err
	}
	if err := wantDType(n, 1, I64); err != nil {
		return Type{}, err
	}
	if n.Args[0].Type.Shape[0] != n.Args[1].Type.Shape[0] {
		return Type{}, errf("row counts differ: %s vs %s", n.Args[0].Type.Shape, n.Args[1].Type.Shape)
	}
	return Type{n.Args[0].Type.DType, n.Args[1].Type.Shape}, nil
}

func topkIdxRule(n *Node) (Type, error) {
	if err := wantRank(n, 0, 2); err != nil {
		return Type{}, err
	}
	k := n.Attrs.Int("k", 0)
	if l := n.Args[0].Type.Shape[1]; k <= 0 || (l.IsConst() && k > l.N) {
		return Type{}, errf("k = %d out of range for %s", k, n.Args[0].Type.Shape)
	}
	return T(I64, n.Args[0].Type.Shape[0], k), nil
}

func matmulRule(n *Node) (Type, error) {
	x, w := n.Args[0].Type, n.Args[1].Type
	if err := floatArg(n, 0); err != nil {
		return Type{}, err
	}
	if err := wantRank(n, 1, 2); err != nil {
		return Type{}, err
	}
	if !w.DType.IsFloat() || w.DType != x.DType {
		return Type{}, errf("weight dtype %s must equal the input's %s", w.DType, x.DType)
	}
	if x.Shape.Rank() < 1 || x.Shape.Last() != w.Shape[1] {
		return Type{}, errf("inner dims differ: %s · %sᵀ", x.Shape, w.Shape)
	}
	s := x.Shape.Clone()
	s[len(s)-1] = w.Shape[0]
	return Type{x.DType, s}, nil
}

func matmulQuantRule(n *Node) (Type, error) {
	x, w := n.Args[0].Type, n.Args[1].Type
	if err := wantDType(n, 0, BF16); err != nil {
		return Type{}, err
	}
	want := F8E4M3
	if n.Op == "matmul_fp4" {
		want = FP4E2M1
	}
	if w.DType != want {
		return Type{}, errf("%s needs %s weights, got %s", n.Op, want, w.DType)
	}
	if err := wantRank(n, 1, 2); err != nil {
		return Type{}, err
	}
	if x.Shape.Rank() < 1 || x.Shape.Last() != w.Shape[1] {
		return Type{}, errf("inner dims differ: %s · %sᵀ", x.Shape, w.Shape)
	}
	s := x.Shape.Clone()
	s[len(s)-1] = w.Shape[0]
	return Type{BF16, s}, nil
}

func groupedRule(n *Node) (Type, error) {
	x, w := n.Args[0].Type, n.Args[1].Type
	g := n.Attrs.Int("groups", 0)
	if err := wantRank(n, 1, 2); err != nil {
		return Type{}, err
	}
	if err := wantDType(n, 0, BF16); err != nil {
		return Type{}, err
	}
	if x.Shape.Rank() < 1 || !w.Shape[0].IsConst() || !w.Shape[1].IsConst() || w.Shape[1].N <= 0 {
		return Type{}, errf("weight %s and input %s do not fit a grouped matmul", w, x)
	}
	l := x.Shape.Last()
	if g <= 0 || !l.IsConst() || l.N != g*w.Shape[1].N || w.Shape[0].N%g != 0 {
		return Type{}, errf("groups %d do not fit %s and weight %s", g, x.Shape, w.Shape)
	}
	s := x.Shape.Clone()
	s[len(s)-1] = w.Shape[0]
	return Type{BF16, s}, nil
}

func expertMatmulRule(n *Node) (Type, error) {
	x, w, idx := n.Args[0].Type, n.Args[1].Type, n.Args[2].Type
	if err := wantRank(n, 1, 3); err != nil {
		return Type{}, err
	}
	if err := wantRank(n, 2, 2); err != nil {
		return Type{}, err
	}
	if err := wantDType(n, 2, I64); err != nil {
		return Type{}, err
	}
	if x.Shape.Rank() >= 2 && x.Shape[0] != idx.Shape[0] {
		return Type{}, errf("input rows %s differ from route rows %s", x.Shape, idx.Shape)
	}
	if w.DType != FP4E2M1 && w.DType != F8E4M3 {
		return Type{}, errf("expert weights must be fp4 or fp8, got %s", w.DType)
	}
	if x.DType != BF16 || (x.Shape.Rank() != 2 && x.Shape.Rank() != 3) || x.Shape.Last() != w.Shape[2] {
		return Type{}, errf("input %s does not fit expert weights %s", x, w)
	}
	if x.Shape.Rank() == 3 && (x.Shape[1] != idx.Shape[1]) {
		return Type{}, errf("input slots %s differ from routes %s", x.Shape, idx.Shape)
	}
	return T(BF16, idx.Shape[0], idx.Shape[1], w.Shape[1]), nil
}

func moeCombineRule(n *Node) (Type, error) {
	y := n.Args[0].Type
	if err := wantRank(n, 0, 3); err != nil {
		return Type{}, err
	}
	if !n.Args[1].Type.Shape.Equal(y.Shape[:2]) {
		return Type{}, errf("routes %s do not match %s", n.Args[1].Type.Shape, y.Shape)
	}
	return T(F32, y.Shape[0], y.Shape[2]), nil
}

func rmsnormRule(n *Node) (Type, error) {
	x, w := n.Args[0].Type, n.Args[1].Type
	if err := floatArg(n, 0); err != nil {
		return Type{}, err
	}
	if w.Shape.Rank() != 1 || w.Shape[0] != x.Shape.Last() {
		return Type{}, errf("weight %s does not match last dim of %s", w, x)
	}
	return x, nil
}

func hcPreRule(n *Node) (Type, error) {
	h, p := n.Args[0].Type, n.Args[1].Type
	r := h.Shape.Rank()
	if r < 2 {
		return Type{}, errf("stream %s needs rank ≥ 2", h)
	}
	if b, err := Broadcast(p.Shape, h.Shape[:r-1]); err != nil || !b.Equal(h.Shape[:r-1]) {
		return Type{}, errf("pre %s does not match stream %s", p, h)
	}
	s := append(h.Shape[:r-2:r-2], h.Shape[r-1])
	return Type{BF16, s}, nil
}

func hcPostRule(n *Node) (Type, error) {
	y, res, post, comb := n.Args[0].Type, n.Args[1].Type, n.Args[2].Type, n.Args[3].Type
	r := res.Shape.Rank()
	if r < 2 || !y.Shape.Equal(append(res.Shape[:r-2:r-2], res.Shape[r-1])) {
		return Type{}, errf("sublayer output %s does not match stream %s", y, res)
	}
	hc := res.Shape[r-2]
	if !post.Shape.Equal(res.Shape[:r-1]) || !comb.Shape.Equal(append(res.Shape[:r-1:r-1], hc)) {
		return Type{}, errf("post %s / comb %s do not match stream %s", post, comb, res)
	}
	return Type{BF16, res.Shape}, nil
}

func positionsRule(n *Node) (Type, error) {
	tok := n.Args[0].Type
	if err := wantRank(n, 0, 2); err != nil {
		return Type{}, err
	}
	if err := wantRank(n, 1, 0); err != nil {
		return Type{}, err
	}
	r := n.Attrs.Int("ratio", 0)
	if r < 1 {
		return Type{}, errf("ratio must be ≥ 1")
	}
	if r == 1 {
		return Type{I64, Shape{tok.Shape[1]}}, nil
	}
	return T(I64, GroupsDim(tok.Shape[1], r)), nil
}

// GroupsDim names the number of compressed groups completed by a call of s tokens.
func GroupsDim(s Dim, r int64) Dim {
	if s == C(1) {
		return Sym(fmt.Sprintf("(P+1)/%d-P/%d", r, r))
	}
	return Sym(fmt.Sprintf("(P+%s)/%d-P/%d", s, r, r))
}

// CompressedDim names the number of compressed rows visible after a call of s tokens.
func CompressedDim(s Dim, r int64) Dim {
	if r == 1 {
		return Sym(fmt.Sprintf("P+%s", s))
	}
	return Sym(fmt.Sprintf("(P+%s)/%d", s, r))
}

func ropeRule(n *Node) (Type, error) {
	x, tab, pos := n.Args[0].Type, n.Args[1].Type, n.Args[2].Type
	d := n.Attrs.Int("dim", 0)
	if d <= 0 || d%2 != 0 || !x.Shape.Last().IsConst() || x.Shape.Last().N < d {
		return Type{}, errf("rope dim %d does not fit %s", d, x)
	}
	if tab.DType != F32 || tab.Shape.Rank() != 3 || tab.Shape[1] != C(d/2) {
		return Type{}, errf("table %s does not fit rope dim %d", tab, d)
	}
	if pos.DType != I64 || pos.Shape.Rank() != 1 || x.Shape.Rank() < 3 || pos.Shape[0] != x.Shape[1] {
		return Type{}, errf("positions %s do not match axis 1 of %s", pos, x)
	}
	return x, nil
}

func ropeTableRule(n *Node) (Type, error) {
	a := n.Attrs
	d := a.Int("dim", 0)
	switch {
	case d <= 0 || d%2 != 0:
		return Type{}, errf("dim %d must be positive and even", d)
	case a.Float("base", 0) <= 0 || a.Float("factor", 0) <= 0:
		return Type{}, errf("base %v and factor %v must be positive", a.Float("base", 0), a.Float("factor", 0))
	case a.Int("original_seq_len", 0) < 0:
		return Type{}, errf("original_seq_len %d must be ≥ 0", a.Int("original_seq_len", 0))
	}
	if want := T(F32, "M", d/2, 2); !n.Type.Equal(want) {
		return Type{}, errf("declared %s, want %s for dim %d", n.Type, want, d)
	}
	return n.Type, nil
}

func windowIdxRule(n *Node) (Type, error) {
	tok := n.Args[0].Type
	w := n.Attrs.Int("window", 0)
	if err := wantRank(n, 0, 2); err != nil {
		return Type{}, err
	}
	if w <= 0 {
		return Type{}, errf("window must be positive")
	}
	switch n.Attrs.Str("phase", "") {
	case "prefill":
		if tok.Shape[1].IsConst() {
			return T(I32, tok.Shape[0], tok.Shape[1], min(tok.Shape[1].N, w)), nil
		}
		return T(I32, tok.Shape[0], tok.Shape[1], fmt.Sprintf("min(%s,%d)", tok.Shape[1], w)), nil
	case "decode":
		if tok.Shape[1] != C(1) {
			return Type{}, errf("decode takes one token, got %s", tok)
		}
		return T(I32, tok.Shape[0], 1, w), nil
	case "chunk":
		return T(I32, tok.Shape[0], tok.Shape[1], w), nil
	}
	return Type{}, errf("phase must be prefill, decode or chunk")
}

func windowUpdateRule(n *Node) (Type, error) {
	ring, kv := n.Args[0].Type, n.Args[1].Type
	if ring.Shape.Rank() != 3 || kv.Shape.Rank() != 3 || ring.Shape[0] != kv.Shape[0] || ring.Shape[2] != kv.Shape[2] {
		return Type{}, errf("kv %s does not fit ring %s", kv, ring)
	}
	return ring, nil
}

func sparseAttnRule(n *Node) (Type, error) {
	q, kv, sink, idx := n.Args[0].Type, n.Args[1].Type, n.Args[2].Type, n.Args[3].Type
	if q.Shape.Rank() != 4 || kv.Shape.Rank() != 3 || idx.Shape.Rank() != 3 {
		return Type{}, errf("want q [B,S,H,D], kv [B,N,D], idx [B,S,T]; got %s, %s, %s", q, kv, idx)
	}
	if q.Shape[3] != kv.Shape[2] || sink.Shape.Rank() != 1 || sink.Shape[0] != q.Shape[2] || idx.DType != I32 {
		return Type{}, errf("q %s, kv %s, sink %s, idx %s do not fit", q, kv, sink, idx)
	}
	if len(n.Args) == 5 {
		kv2 := n.Args[4].Type
		if kv2.DType != kv.DType || kv2.Shape.Rank() != 3 || kv2.Shape[0] != kv.Shape[0] || kv2.Shape[2] != kv.Shape[2] {
			return Type{}, errf("kv2 %s does not continue kv %s", kv2, kv)
		}
	}
	return Type{BF16, q.Shape}, nil
}

func groupStateRule(n *Node) (Type, error) {
	st, x := n.Args[0].Type, n.Args[1].Type
	if st.Shape.Rank() != 3 || x.Shape.Rank() != 3 || st.Shape[2] != x.Shape[2] || st.Shape[1] != C(n.Attrs.Int("ratio", 0)) {
		return Type{}, errf("input %s does not fit state %s", x, st)
	}
	return st, nil
}

func compressorPoolRule(n *Node) (Type, error) {
	c, z := n.Args[0].Type, n.Args[1].Type
	r := n.Attrs.Int("ratio", 0)
	if c.DType != F32 || !c.Equal(z) || c.Shape.Rank() != 3 || r < 2 {
		return Type{}, errf("c %s and z %s must be equal f32 [B,S,D], ratio ≥ 2", c, z)
	}
	return T(F32, c.Shape[0], GroupsDim(c.Shape[1], r), c.Shape[2]), nil
}

func cacheWriteRule(n *Node) (Type, error) {
	cache, rows := n.Args[0].Type, n.Args[1].Type
	if cache.Shape.Rank() != 3 || rows.Shape.Rank() != 3 || cache.Shape[2] != rows.Shape[2] {
		return Type{}, errf("rows %s do not fit cache %s", rows, cache)
	}
	return cache, nil
}

func cacheReadRule(n *Node) (Type, error) {
	cache, tok := n.Args[0].Type, n.Args[1].Type
	if cache.Shape.Rank() != 3 || tok.Shape.Rank() != 2 {
		return Type{}, errf("want cache [B,M/r,D] and tokens [B,S], got %s, %s", cache, tok)
	}
	if n.Attrs.Int("ratio", 0) < 1 {
		return Type{}, errf("ratio must be ≥ 1")
	}
	return T(cache.DType, cache.Shape[0], CompressedDim(tok.Shape[1], n.Attrs.Int("ratio", 1)), cache.Shape[2]), nil
}

func indexScoreRule(n *Node) (Type, error) {
	q, k, w := n.Args[0].Type, n.Args[1].Type, n.Args[2].Type
	if q.Shape.Rank() != 4 || k.Shape.Rank() != 3 || w.Shape.Rank() != 3 || q.Shape[3] != k.Shape[2] || !w.Shape.Equal(q.Shape[:3]) {
		return Type{}, errf("want q [B,S,H,D], k [B,N,D], w [B,S,H]; got %s, %s, %s", q, k, w)
	}
	return T(BF16, q.Shape[0], q.Shape[1], k.Shape[1]), nil
}

func indexMaskRule(n *Node) (Type, error) {
	if err := wantRank(n, 0, 3); err != nil {
		return Type{}, err
	}
	return n.Args[0].Type, nil
}

func candidateRule(n *Node) (Type, error) {
	if err := wantRank(n, 0, 3); err != nil {
		return Type{}, err
	}
	if n.Attrs.Int("block", 0) <= 0 || n.Attrs.Int("topk_blocks", 0) <= 0 {
		return Type{}, errf("block and topk_blocks must be positive")
	}
	return Type{U8, n.Args[0].Type.Shape}, nil
}

func indexTopkRule(n *Node) (Type, error) {
	s := n.Args[0].Type.Shape
	if err := wantRank(n, 0, 3); err != nil {
		return Type{}, err
	}
	if err := wantRank(n, 2, 3); err != nil {
		return Type{}, err
	}
	k := n.Attrs.Int("k", 0)
	if k <= 0 {
		return Type{}, errf("k must be positive")
	}
	return T(I32, s[0], s[1], Sym(fmt.Sprintf("min(%d,%s)", k, s[2]))), nil
}

func engramHistRule(n *Node) (Type, error) {
	h, ids := n.Args[0].Type, n.Args[1].Type
	if h.DType != I64 || h.Shape.Rank() != 2 || ids.DType != I64 || ids.Shape.Rank() != 2 {
		return Type{}, errf("want history i64[B,M] and ids i64[B,S], got %s, %s", h, ids)
	}
	return h, nil
}

func engramHashRule(n *Node) (Type, error) {
	tok := n.Args[1].Type
	if err := wantRank(n, 1, 2); err != nil {
		return Type{}, err
	}
	if err := wantDType(n, 0, I64); err != nil {
		return Type{}, err
	}
	if pad := n.Args[3].Type; pad.DType != I64 || !pad.Shape.Equal(Shape{C(1)}) {
		return Type{}, errf("argument 3: want the pad id i64[1], got %s", pad)
	}
	m, p, o := n.Attrs.Ints("multipliers"), n.Attrs.Ints("primes"), n.Attrs.Ints("offsets")
	heads := n.Attrs.Int("heads", 0)
	if len(m) < 2 || heads <= 0 || int64(len(p)) != int64(len(m)-1)*heads || len(o) != len(p) {
		return Type{}, errf("inconsistent hash constants: %d multipliers, %d primes, %d offsets, %d heads", len(m), len(p), len(o), heads)
	}
	return T(I64, tok.Shape[0], tok.Shape[1], len(p)), nil
}

func engramLookupRule(n *Node) (Type, error) {
	tab, rows := n.Args[0].Type, n.Args[1].Type
	if tab.DType != F8E4M3 || tab.Shape.Rank() != 2 || rows.DType != I64 || rows.Shape.Rank() != 3 || !rows.Shape[2].IsConst() {
		return Type{}, errf("want an fp8row table and i64[B,S,C] rows, got %s, %s", tab, rows)
	}
	return T(BF16, rows.Shape[0], rows.Shape[1], rows.Shape[2].N*tab.Shape[1].N), nil
}

func engramGateRule(n *Node) (Type, error) {
	h, key, val, om := n.Args[0].Type, n.Args[1].Type, n.Args[2].Type, n.Args[3].Type
	if h.Shape.Rank() != 4 || !key.Shape.Equal(h.Shape) || val.Shape.Rank() != 3 || val.Shape[2] != h.Shape[3] || !om.Shape.Equal(h.Shape[2:]) {
		return Type{}, errf("h %s, key %s, value %s, omega %s do not fit", h, key, val, om)
	}
	return Type{BF16, h.Shape}, nil
}

func hcMixRule(n *Node) (Type, error) {
	h, fn := n.Args[0].Type, n.Args[1].Type
	r := h.Shape.Rank()
	if r < 2 || fn.Shape.Rank() != 2 || !h.Shape[r-1].IsConst() || !h.Shape[r-2].IsConst() || fn.Shape[1].N != h.Shape[r-1].N*h.Shape[r-2].N {
		return Type{}, errf("fn %s does not fit stream %s", fn, h)
	}
	return Type{F32, append(h.Shape[:r-2:r-2], fn.Shape[0])}, nil
}

func sinkhornRule(n *Node) (Type, error) {
	m := n.Args[0].Type
	hc := n.Attrs.Int("hc", 0)
	if m.DType != F32 || m.Shape.Last() != C((2+hc)*hc) {
		return Type{}, errf("mixes %s do not have (2+hc)*hc = %d columns", m, (2+hc)*hc)
	}
	return m, nil
}

func swigluRule(n *Node) (Type, error) {
	g, u := n.Args[0].Type, n.Args[1].Type
	if !g.Equal(u) || g.DType != F32 {
		return Type{}, errf("gate %s and up %s must be equal f32 types", g, u)
	}
	return Type{BF16, g.Shape}, nil
}
