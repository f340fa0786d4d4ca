package deepseekv4

import (
	"fmt"
	"math"

	"github.com/ds4go/ds4/ir"
)

// Phase selects which of the call shapes a graph serves.
type Phase int

// The two call shapes of the reference (spec §4): prefill starts at position
// 0 with any number of tokens; decode adds one token at start_pos > 0.
// Chunk is the incremental form of both, S tokens at any start_pos (a long
// prompt in bounded memory): the decode graph's reads of the window ring,
// compressor state and compressed caches, with the prefill graph's layout
// of the attention's index lists, so that a prompt run in chunks gives the
// bits of one prefill call (engine.Session.Prefill).
const (
	Prefill Phase = iota
	Decode
	Chunk
)

func (p Phase) String() string {
	switch p {
	case Decode:
		return "decode"
	case Chunk:
		return "chunk"
	}
	return "prefill"
}

// BuildModule builds the prefill, decode and chunk graphs of the text path.
func BuildModule(c *Config) (*ir.Module, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	m := &ir.Module{Meta: map[string]string{"model": "deepseek-v4.1", "config_fingerprint": c.Fingerprint()}}
	lay, err := EngramLayout(c)
	if err != nil {
		return nil, err
	}
	for _, ph := range []Phase{Prefill, Decode, Chunk} {
		g, err := buildGraph(c, ph, lay)
		if err != nil {
			return nil, err
		}
		m.Graphs = append(m.Graphs, g)
	}
	return m, nil
}

// BuildGraph builds one graph. The graph is written the way the reference
// computes (primitive ops, every Sinkhorn iteration explicit); fusion is the
// job of the passes.
func BuildGraph(c *Config, ph Phase) (*ir.Graph, error) {
	lay, err := EngramLayout(c)
	if err != nil {
		return nil, err
	}
	return buildGraph(c, ph, lay)
}

func buildGraph(c *Config, ph Phase, lay []EngramLayerConsts) (g *ir.Graph, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("building the %s graph: %v", ph, r)
		}
	}()
	b := &builder{c: c, ph: ph, g: ir.NewGraph(ph.String()), layers: c.Layers(),
		published: map[string]*ir.Node{}, tables: map[int]*ir.Node{}, engramLay: lay}
	b.build()
	return b.g, nil
}

type builder struct {
	c      *Config
	ph     Phase
	g      *ir.Graph
	layers []LayerInfo

	tokens, startPos, pos *ir.Node
	S, N                  ir.Dim // tokens per row in this call; rows of the flattened token axis
	// published holds the values a source layer shares with later layers,
	// keyed "kind@layer" (the reference's shared_attn slots).
	published map[string]*ir.Node
	tables    map[int]*ir.Node // RoPE tables by ratio class (0 or >0)
	engramLay []EngramLayerConsts
	engramPad *ir.Node // token_map[engram_pad_id]
}

func (b *builder) add(op string, attrs ir.Attrs, args ...*ir.Node) *ir.Node {
	return b.g.Add(op, attrs, args...)
}

func (b *builder) probe(x *ir.Node, name string, force bool) *ir.Node {
	a := ir.Attrs{"name": name}
	if force {
		a["force"] = true
	}
	return b.add("probe", a, x)
}

// weight declares a checkpoint tensor. layer < 0 marks a global tensor.
func (b *builder) weight(name, format string, layer int, component string, t ir.Type) *ir.Node {
	return b.g.Source("weight", t, ir.Attrs{"name": name, "format": format, "layer": int64(layer), "component": component})
}

func (b *builder) experts(name, format string, layer int, component string, t ir.Type, n int) *ir.Node {
	return b.g.Source("weight", t, ir.Attrs{"name": name, "format": format, "layer": int64(layer), "component": component, "experts": int64(n)})
}

func (b *builder) state(name, kind string, t ir.Type) *ir.Node {
	return b.g.Source("state", t, ir.Attrs{"name": name, "kind": kind})
}

func f(v float64) float64 { return v }

func (b *builder) shape(dims ...any) string { return ir.Dims(dims...).String() }

// linearFP8 is every fp8 Linear of the reference: act_quant the input, then
// the block-scaled GEMM.
func (b *builder) linearFP8(x *ir.Node, name string, layer int, comp string, out, in int) *ir.Node {
	w := b.weight(name+".weight", "fp8", layer, comp, ir.T(ir.F8E4M3, out, in))
	return b.add("matmul_fp8", nil, b.add("act_quant", ir.Attrs{"block": int64(32)}, x), w)
}

func (b *builder) norm(x *ir.Node, name string, layer int, comp string, dim int) *ir.Node {
	w := b.weight(name, "bf16", layer, comp, ir.T(ir.BF16, dim))
	return b.add("rmsnorm", ir.Attrs{"eps": b.c.NormEps}, x, w)
}

func (b *builder) build() {
	c := b.c
	if b.ph != Decode {
		b.S, b.N = ir.Sym("S"), ir.Sym("B*S")
	} else {
		b.S, b.N = ir.C(1), ir.Sym("B")
	}
	b.tokens = b.g.Source("input", ir.T(ir.I64, "B", b.S), ir.Attrs{"name": "tokens"})
	b.startPos = b.g.Source("input", ir.T(ir.I64), ir.Attrs{"name": "start_pos"})
	b.pos = b.add("positions", ir.Attrs{"ratio": int64(1)}, b.tokens, b.startPos)

	D, HC := c.Dim, c.HCMult
	emb := b.weight("embed.weight", "bf16", -1, "embedding", ir.T(ir.BF16, c.VocabSize, D))
	x := b.probe(b.add("embed", nil, emb, b.tokens), "embed", false)
	h := b.add("expand", ir.Attrs{"axis": int64(2), "n": int64(HC)}, x)
	one := make([]float64, HC)
	one[0] = 1
	pre := b.g.Source("const", ir.T(ir.F32, HC), ir.Attrs{"floats": one})

	var hist *ir.Node
	if len(c.EngramLayerIDs) > 0 {
		tmap := b.weight("token_map", "i64", -1, "engram_token_map", ir.T(ir.I64, c.VocabSize))
		mapped := b.add("token_map", nil, tmap, b.tokens)
		// Missing history is padded with the mapped id of engram_pad_id.
		padID := b.g.Source("const", ir.T(ir.I64, 1), ir.Attrs{"ints": []int64{int64(c.EngramPadID)}})
		b.engramPad = b.add("token_map", nil, tmap, padID)
		hist = b.state("engram.history", "engram_history", ir.T(ir.I64, "B", "M"))
		hist = b.add("engram_hist_update", nil, hist, mapped, b.startPos)
	}
	for _, L := range b.layers {
		if L.Index > 0 {
			h = b.probe(h, fmt.Sprintf("L%d.stream_out", L.Index-1), true)
		}
		if L.Engram {
			h = b.probe(b.engram(h, hist, L), fmt.Sprintf("L%d.engram_out", L.Index), true)
		}
		pre = b.probe(pre, fmt.Sprintf("L%d.pre_in", L.Index), true)
		h, pre = b.block(h, pre, L)
	}
	last := len(b.layers) - 1
	h = b.probe(h, fmt.Sprintf("L%d.stream_out", last), true)
	x = b.probe(b.add("hc_pre", nil, h, pre), "final_hidden", false)
	x = b.probe(b.norm(x, "norm.weight", -1, "final_norm", D), "final_normed", false)
	head := b.weight("head.weight", "bf16", -1, "head", ir.T(ir.F32, c.VocabSize, D))
	logits := b.add("matmul", nil, b.add("cast", ir.Attrs{"to": "f32"}, x), head)
	b.g.SetOutput("logits", logits)
}

// block is Block.forward (spec §4.3) with the lagged pre mix.
func (b *builder) block(h, preIn *ir.Node, L LayerInfo) (*ir.Node, *ir.Node) {
	l := L.Index
	p := fmt.Sprintf("layers.%d.", l)
	tag := fmt.Sprintf("L%d.", l)
	res := h
	aPre, aPost, aComb := b.hcMixes(h, l, "attn")
	x := b.add("hc_pre", nil, h, preIn)
	x = b.probe(b.norm(x, p+"attn_norm.weight", l, "attn_norm", b.c.Dim), tag+"attn_in", false)
	y := b.probe(b.attention(x, L), tag+"attn_out", false)
	h = b.add("hc_post", nil, y, res, aPost, aComb)
	res = h
	fPre, fPost, fComb := b.hcMixes(h, l, "ffn")
	x = b.add("hc_pre", nil, h, aPre)
	x = b.probe(b.norm(x, p+"ffn_norm.weight", l, "ffn_norm", b.c.Dim), tag+"ffn_in", false)
	y = b.probe(b.moe(x, l), tag+"moe_out", false)
	h = b.add("hc_post", nil, y, res, fPost, fComb)
	return h, b.probe(fPre, tag+"pre_out", false)
}

// hcMixes writes hc_mixes and hc_split_sinkhorn as primitive ops (spec §4.3).
func (b *builder) hcMixes(h *ir.Node, l int, which string) (pre, post, comb *ir.Node) {
	c := b.c
	HC, D := c.HCMult, c.Dim
	mix := (2 + HC) * HC
	p := fmt.Sprintf("layers.%d.hc_%s_", l, which)
	comp := "hc_" + which
	fn := b.weight(p+"fn", "f32", l, comp+"/fn", ir.T(ir.F32, mix, HC*D))
	base := b.weight(p+"base", "f32", l, comp+"/base", ir.T(ir.F32, mix))
	scale := b.weight(p+"scale", "f32", l, comp+"/scale", ir.T(ir.F32, 3))
	eps := c.HCEps

	flat := b.add("reshape", ir.Attrs{"shape": b.shape("B", b.S, HC*D)}, b.add("cast", ir.Attrs{"to": "f32"}, h))
	ms := b.add("mean_sq", ir.Attrs{"axis": int64(-1)}, flat)
	rs := b.add("rsqrt", nil, b.add("add_scalar", ir.Attrs{"value": c.NormEps}, ms))
	m := b.add("mul", nil, b.add("matmul", nil, flat, fn), rs)

	sl := func(x *ir.Node, lo, hi int) *ir.Node {
		return b.add("slice", ir.Attrs{"axis": int64(-1), "start": int64(lo), "end": int64(hi)}, x)
	}
	affine := func(lo, hi, k int) *ir.Node {
		return b.add("add", nil, b.add("mul", nil, sl(m, lo, hi), sl(scale, k, k+1)), sl(base, lo, hi))
	}
	pre = b.add("add_scalar", ir.Attrs{"value": eps}, b.add("sigmoid", nil, affine(0, HC, 0)))
	post = b.add("mul_scalar", ir.Attrs{"value": f(2)}, b.add("sigmoid", nil, affine(HC, 2*HC, 1)))
	cm := b.add("reshape", ir.Attrs{"shape": b.shape("B", b.S, HC, HC)}, affine(2*HC, mix, 2))
	cm = b.add("add_scalar", ir.Attrs{"value": eps}, b.add("softmax", ir.Attrs{"axis": int64(-1)}, cm))
	norm := func(x *ir.Node, axis int64) *ir.Node {
		s := b.add("add_scalar", ir.Attrs{"value": eps}, b.add("sum", ir.Attrs{"axis": axis}, x))
		return b.add("div", nil, x, s)
	}
	cm = norm(cm, -2)
	for i := 1; i < c.HCSinkhornIters; i++ {
		cm = norm(norm(cm, -1), -2)
	}
	tag := fmt.Sprintf("L%d.hc_%s_", l, which)
	return b.probe(pre, tag+"pre", false), b.probe(post, tag+"post", false), b.probe(cm, tag+"comb", false)
}

func (b *builder) ropeTable(ratio int) *ir.Node {
	cls := min(ratio, 1)
	if t, ok := b.tables[cls]; ok {
		return t
	}
	c := b.c
	a := ir.Attrs{"dim": int64(c.RopeHeadDim), "beta_fast": c.BetaFast, "beta_slow": c.BetaSlow}
	if cls == 0 {
		a["base"], a["factor"], a["original_seq_len"] = c.RopeTheta, f(1), int64(0)
	} else {
		a["base"], a["factor"], a["original_seq_len"] = c.CompressRopeTheta, c.RopeFactor, int64(c.OriginalSeqLen)
	}
	t := b.g.Source("rope_table", ir.T(ir.F32, "M", c.RopeHeadDim/2, 2), a)
	b.tables[cls] = t
	return t
}

func (b *builder) rope(x, table, pos *ir.Node, inverse bool) *ir.Node {
	a := ir.Attrs{"dim": int64(b.c.RopeHeadDim)}
	if inverse {
		a["inverse"] = true
	}
	return b.add("rope", a, x, table, pos)
}

// attention is Attention.forward with every layer kind of spec §3.
func (b *builder) attention(x *ir.Node, L LayerInfo) *ir.Node {
	c := b.c
	l, r := L.Index, L.Ratio
	p := fmt.Sprintf("layers.%d.attn.", l)
	tag := fmt.Sprintf("L%d.", l)
	D, H, Dh := c.Dim, c.NHeads, c.HeadDim
	table := b.ropeTable(r)
	q32 := ir.Attrs{"block": int64(32)}

	// (1) q path.
	qr := b.norm(b.linearFP8(x, p+"wq_a", l, "attention/core/wq_a", c.QLoraRank, D), p+"q_norm.weight", l, "attention/core/q_norm", c.QLoraRank)
	q := b.linearFP8(qr, p+"wq_b", l, "attention/core/wq_b", H*Dh, c.QLoraRank)
	q = b.rope(b.add("reshape", ir.Attrs{"shape": b.shape("B", b.S, H, Dh)}, q), table, b.pos, false)

	// (2) window KV, fp8 fake-quantised in place, written into the ring.
	kv := b.norm(b.linearFP8(x, p+"wkv", l, "attention/core/wkv", Dh, D), p+"kv_norm.weight", l, "attention/core/kv_norm", Dh)
	kv = b.add("act_quant", q32, b.rope(kv, table, b.pos, false))
	ring := b.state(fmt.Sprintf("L%d.window_kv_cache", l), "window", ir.T(ir.BF16, "B", c.WindowSize, Dh))
	winKV := kv
	if b.ph == Chunk {
		// the ring as the previous call left it, then the chunk's rows (read
		// before the update below overwrites slots the first queries need)
		winKV = b.add("concat", ir.Attrs{"axis": int64(1)}, ring, kv)
	}
	ring = b.add("window_update", nil, ring, kv, b.startPos)
	if b.ph == Decode {
		winKV = ring
	}
	idx := b.add("window_idx", ir.Attrs{"window": int64(c.WindowSize), "phase": b.ph.String()}, b.tokens, b.startPos)
	var ckv *ir.Node // the compressed rows after the window's (sparse_attn's kv2)

	if r > 0 {
		R := int64(r)
		var latent, gpos *ir.Node
		// (3) compressor.
		if L.KVSource {
			cp := p + "compressor."
			if r == 1 {
				w := b.weight(cp+"wkv.weight", "bf16", l, "attention/compressor/wkv", ir.T(ir.BF16, Dh, D))
				latent = b.add("matmul", nil, x, w)
			} else {
				st := fmt.Sprintf("L%d.compressor_", l)
				xf := b.add("cast", ir.Attrs{"to": "f32"}, x)
				wkv := b.weight(cp+"wkv.weight", "bf16", l, "attention/compressor/wkv", ir.T(ir.F32, Dh, D))
				wg := b.weight(cp+"wgate.weight", "bf16", l, "attention/compressor/wgate", ir.T(ir.F32, Dh, D))
				cc := b.add("matmul", nil, xf, wkv)
				z := b.add("matmul", nil, xf, wg)
				kvst := b.state(st+"kv_state", "compressor_kv", ir.T(ir.F32, "B", r, Dh))
				scst := b.state(st+"score_state", "compressor_score", ir.T(ir.F32, "B", r, Dh))
				var pooled *ir.Node
				if b.ph == Chunk { // pool from the state before this call's tail is written
					pooled = b.add("compressor_pool", ir.Attrs{"ratio": R}, cc, z, kvst, scst, b.startPos)
				}
				kvst = b.add("group_state_update", ir.Attrs{"ratio": R}, kvst, cc, b.startPos)
				scst = b.add("group_state_update", ir.Attrs{"ratio": R}, scst, z, b.startPos)
				if pooled == nil {
					pooled = b.add("compressor_pool", ir.Attrs{"ratio": R}, cc, z, kvst, scst, b.startPos)
				}
				latent = b.add("cast", ir.Attrs{"to": "bf16"}, pooled)
			}
			latent = b.norm(latent, cp+"norm.weight", l, "attention/compressor/norm", Dh)
			latent = b.probe(latent, tag+"compressor_latent", false)
			gpos = b.add("positions", ir.Attrs{"ratio": R}, b.tokens, b.startPos)
		}
		// (4) indexer, or the top-k of the most recent index source.
		var topk *ir.Node
		if L.IndexSource {
			topk = b.indexer(x, qr, latent, gpos, winKV, L)
		} else {
			topk = b.published[fmt.Sprintf("topk@%d", L.TopKFrom)]
		}
		// (5) finalise and store the compressed rows.
		if L.KVSource {
			row := b.add("fp4_quant", ir.Attrs{"block": int64(16), "scale": "e4m3"}, b.rope(latent, table, gpos, false))
			cache := b.state(fmt.Sprintf("L%d.compress_kv_cache", l), "compress_kv", ir.T(ir.BF16, "B", fmt.Sprintf("M/%d", r), Dh))
			b.published[fmt.Sprintf("ckv@%d", l)] = b.add("cache_write", ir.Attrs{"ratio": R}, cache, row, b.startPos)
		}
		// (6) the compressed rows visible to this call: read in place after
		// the window's (the reference concatenates them; at a long context
		// the copy would be most of a decode step)
		ckv = b.add("cache_read", ir.Attrs{"ratio": R}, b.published[fmt.Sprintf("ckv@%d", L.KVFrom)], b.tokens, b.startPos)
		idx = b.add("concat", ir.Attrs{"axis": int64(2)}, idx, topk)
	}
	idx = b.probe(idx, tag+"attn_idxs", false)

	// (7) sparse attention with sinks, inverse RoPE, grouped output LoRA.
	sink := b.weight(p+"attn_sink", "f32", l, "attention/core/attn_sink", ir.T(ir.F32, H))
	args := []*ir.Node{q, winKV, sink, idx}
	if ckv != nil {
		args = append(args, ckv)
	}
	o := b.add("sparse_attn", ir.Attrs{"scale": math.Pow(float64(Dh), -0.5)}, args...)
	o = b.rope(o, table, b.pos, true)
	o = b.add("reshape", ir.Attrs{"shape": b.shape("B", b.S, H*Dh)}, o)
	G := c.OGroups
	woA := b.weight(p+"wo_a.weight", "fp8", l, "attention/core/wo_a", ir.T(ir.BF16, G*c.OLoraRank, H*Dh/G))
	u := b.add("grouped_matmul", ir.Attrs{"groups": int64(G)}, o, woA)
	return b.linearFP8(u, p+"wo_b", l, "attention/core/wo_b", D, G*c.OLoraRank)
}

// indexer is the Indexer of an index source (spec §4.7). It publishes the
// top-k (and, at the candidate source, the candidate mask) for later layers.
func (b *builder) indexer(x, qr, latent, gpos, winKV *ir.Node, L LayerInfo) *ir.Node {
	c := b.c
	l, R := L.Index, int64(L.Ratio)
	p := fmt.Sprintf("layers.%d.attn.indexer.", l)
	tag := fmt.Sprintf("L%d.", l)
	Hi, Di := c.IndexNHeads, c.IndexHeadDim
	table := b.ropeTable(L.Ratio)
	fp4 := ir.Attrs{"block": int64(32), "scale": "e8m0"}
	if L.OwnsIndexK {
		wk := b.weight(p+"wk.weight", "bf16", l, "attention/indexer/wk", ir.T(ir.BF16, Di, c.HeadDim))
		k := b.norm(b.add("matmul", nil, latent, wk), p+"k_norm.weight", l, "attention/indexer/k_norm", Di)
		k = b.add("fp4_quant", fp4, b.rope(k, table, gpos, false))
		cache := b.state(fmt.Sprintf("L%d.index_k_cache", l), "index_k", ir.T(ir.BF16, "B", fmt.Sprintf("M/%d", L.Ratio), Di))
		b.published[fmt.Sprintf("idxk@%d", l)] = b.add("cache_write", ir.Attrs{"ratio": R}, cache, k, b.startPos)
	}
	keys := b.add("cache_read", ir.Attrs{"ratio": R}, b.published[fmt.Sprintf("idxk@%d", L.IndexKFrom)], b.tokens, b.startPos)
	q := b.linearFP8(qr, p+"wq_b", l, "attention/indexer/wq_b", Hi*Di, c.QLoraRank)
	q = b.rope(b.add("reshape", ir.Attrs{"shape": b.shape("B", b.S, Hi, Di)}, q), table, b.pos, false)
	q = b.add("fp4_quant", fp4, q)
	wp := b.weight(p+"weights_proj.weight", "bf16", l, "attention/indexer/weights_proj", ir.T(ir.BF16, Hi, c.Dim))
	w := b.add("mul_scalar", ir.Attrs{"value": math.Pow(float64(Di), -0.5) * math.Pow(float64(Hi), -0.5)}, b.add("matmul", nil, x, wp))
	score := b.add("index_score", nil, q, keys, w)
	score = b.add("index_mask", ir.Attrs{"ratio": R}, score, b.startPos)
	if L.CandidateSource {
		cand := b.add("candidate_blocks", ir.Attrs{"ratio": R, "topk_blocks": int64(c.CandidateTopKBlocks), "block": int64(c.CandidateBlockSize)}, score, b.startPos)
		b.published[fmt.Sprintf("cand@%d", l)] = b.probe(cand, tag+"candidates", false)
	}
	if L.UsesCandidates {
		score = b.add("mask_fill", nil, score, b.published[fmt.Sprintf("cand@%d", L.CandidatesFrom)])
	}
	topk := b.add("index_topk", ir.Attrs{"ratio": R, "k": int64(c.IndexTopK)}, score, b.startPos, winKV)
	topk = b.probe(topk, tag+"index_topk", false)
	b.published[fmt.Sprintf("topk@%d", l)] = topk
	return topk
}

// moe is the gate, the routed experts and the shared expert (spec §4.10),
// with the clamps, SiLU and products as primitive ops.
func (b *builder) moe(x *ir.Node, l int) *ir.Node {
	c := b.c
	p := fmt.Sprintf("layers.%d.ffn.", l)
	tag := fmt.Sprintf("L%d.", l)
	D, E, K, I := c.Dim, c.NRoutedExperts, c.NActivatedExperts, c.MoEInterDim
	x2 := b.add("reshape", ir.Attrs{"shape": b.shape(b.N, D)}, x)

	gw := b.weight(p+"gate.weight", "bf16", l, "moe/gate/weight", ir.T(ir.F32, E, D))
	bias := b.weight(p+"gate.bias", "f32", l, "moe/gate/bias", ir.T(ir.F32, E))
	b.weight(p+"gate.bias_vl", "f32", l, "moe/gate/bias_vl", ir.T(ir.F32, E)) // image spans only; declared for the accounting
	logits := b.add("matmul", nil, b.add("cast", ir.Attrs{"to": "f32"}, x2), gw)
	if c.GateTemp != 1 && c.GateTemp != 0 {
		logits = b.add("mul_scalar", ir.Attrs{"value": 1 / c.GateTemp}, logits)
	}
	var s *ir.Node
	switch c.ScoreFunc {
	case "softmax":
		s = b.add("softmax", ir.Attrs{"axis": int64(-1)}, logits)
	case "sigmoid":
		s = b.add("sigmoid", nil, logits)
	default:
		s = b.add("sqrt", nil, b.add("softplus", nil, logits))
	}
	idx := b.probe(b.add("topk_idx", ir.Attrs{"k": int64(K)}, b.add("add", nil, s, bias)), tag+"gate_indices", false)
	w := b.add("gather", nil, s, idx)
	if c.NormTopKProb && K > 1 {
		w = b.add("div", nil, w, b.add("add_scalar", ir.Attrs{"value": 1e-20}, b.add("sum", ir.Attrs{"axis": int64(-1)}, w)))
	}
	w = b.probe(b.add("mul_scalar", ir.Attrs{"value": c.RouteScale}, w), tag+"gate_weights", false)

	q32 := ir.Attrs{"block": int64(32)}
	xq := b.add("act_quant", q32, x2)
	fmtE, dtE := "fp4", ir.FP4E2M1
	if c.ExpertDtype == "fp8" {
		fmtE, dtE = "fp8", ir.F8E4M3
	}
	ep := p + "experts.{e}."
	w1 := b.experts(ep+"w1.weight", fmtE, l, "moe/routed_experts/w1", ir.T(dtE, E, I, D), E)
	w3 := b.experts(ep+"w3.weight", fmtE, l, "moe/routed_experts/w3", ir.T(dtE, E, I, D), E)
	w2 := b.experts(ep+"w2.weight", fmtE, l, "moe/routed_experts/w2", ir.T(dtE, E, D, I), E)
	g := b.add("expert_matmul", nil, xq, w1, idx)
	u := b.add("expert_matmul", nil, xq, w3, idx)
	rw := b.add("reshape", ir.Attrs{"shape": b.shape(b.N, K, 1)}, w)
	a := b.swiglu(g, u, rw)
	y := b.add("expert_matmul", nil, b.add("act_quant", q32, a), w2, idx)
	routed := b.add("moe_combine", nil, y, idx)

	sp := p + "shared_experts."
	sg := b.linearFP8(x2, sp+"w1", l, "moe/shared_expert/w1", I, D)
	su := b.linearFP8(x2, sp+"w3", l, "moe/shared_expert/w3", I, D)
	shared := b.linearFP8(b.swiglu(sg, su, nil), sp+"w2", l, "moe/shared_expert/w2", D, I)
	out := b.add("add", nil, routed, b.add("cast", ir.Attrs{"to": "f32"}, shared))
	out = b.add("cast", ir.Attrs{"to": "bf16"}, out)
	return b.add("reshape", ir.Attrs{"shape": b.shape("B", b.S, D)}, out)
}

// swiglu writes the clamped SwiGLU of the reference Expert: u clamped to
// ±limit, g clamped from above, silu(g)·u, times the routing weight, in fp32,
// rounded to bf16 before the down projection.
func (b *builder) swiglu(g, u, routeW *ir.Node) *ir.Node {
	L := b.c.SwiGLULimit
	g = b.add("cast", ir.Attrs{"to": "f32"}, g)
	u = b.add("cast", ir.Attrs{"to": "f32"}, u)
	if L > 0 {
		u = b.add("clamp", ir.Attrs{"lo": -L, "hi": L}, u)
		g = b.add("clamp", ir.Attrs{"hi": L}, g)
	}
	a := b.add("mul", nil, b.add("silu", nil, g), u)
	if routeW != nil {
		a = b.add("mul", nil, a, routeW)
	}
	return b.add("cast", ir.Attrs{"to": "bf16"}, a)
}

// engram applies one Engram module to the stream (spec §4.11).
func (b *builder) engram(h, hist *ir.Node, L LayerInfo) *ir.Node {
	c := b.c
	l := L.Index
	p := fmt.Sprintf("layers.%d.engram.", l)
	D, HC, W := c.Dim, c.HCMult, c.EngramHeadDim
	consts := engramConsts(b.engramLay[L.EngramSlot])
	cols := len(consts.primes)
	rows := b.add("engram_hash", ir.Attrs{"multipliers": consts.multipliers, "primes": consts.primes, "offsets": consts.offsets,
		"heads": int64(c.EngramNHeads)}, hist, b.tokens, b.startPos, b.engramPad)
	table := b.weight(p+"embed.weight", "fp8row", l, "engram/table", ir.T(ir.F8E4M3, c.EngramNumEmbeddings[L.EngramSlot], W))
	e := b.add("engram_lookup", nil, table, rows)
	kv := b.linearFP8(e, p+"wkv", l, "engram/wkv", (HC+1)*D, cols*W)
	key := b.add("slice", ir.Attrs{"axis": int64(-1), "start": int64(0), "end": int64(HC * D)}, kv)
	key = b.add("reshape", ir.Attrs{"shape": b.shape("B", b.S, HC, D)}, b.add("cast", ir.Attrs{"to": "f32"}, key))
	val := b.add("slice", ir.Attrs{"axis": int64(-1), "start": int64(HC * D), "end": int64((HC + 1) * D)}, kv)
	qw := b.weight(p+"q_weight", "bf16", l, "engram/q_weight", ir.T(ir.F32, HC, D))
	kw := b.weight(p+"k_weight", "bf16", l, "engram/k_weight", ir.T(ir.F32, HC, D))
	omega := b.add("mul", nil, qw, kw)
	return b.add("engram_gate", ir.Attrs{"eps": c.NormEps}, h, key, val, omega)
}
