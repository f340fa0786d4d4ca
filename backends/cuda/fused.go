package cuda

import (
	"fmt"
	"os"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/ir"
)

// The fused runs (fuse.go) and their launchers (kernels of fused.cuh).

// planFusions returns the runs of seg that fused kernels compute, each
// checked by graphInfo.check; a node is in at most one run.
func planFusions(seg *backends.Segment) []*fusion {
	g := newGraphInfo(seg)
	used := map[int]bool{}
	var out []*fusion
	add := func(f *fusion) {
		if f == nil || !g.check(f) {
			return
		}
		for _, i := range f.nodes {
			if used[i] {
				return
			}
		}
		for _, i := range f.nodes {
			used[i] = true
		}
		out = append(out, f)
	}
	for i, n := range seg.Nodes {
		switch n.Op {
		case "hc_split_sinkhorn":
			add(g.hcMixSplit(i, n))
		case "rmsnorm":
			add(g.preNormQuant(i, n))
		case "topk_idx":
			add(g.gateTail(i, n))
		case "swiglu_clamp":
			if f := g.routedSwiGLU(i, n); f != nil {
				add(f)
			} else {
				add(g.sharedSwiGLU(i, n))
			}
		}
	}
	return out
}

// hcMixSplit is hc_mix → hc_split_sinkhorn → its three slices (pre, post,
// comb): Kernels.HCMixSplit (two launches, the mixes written straight into
// the three outputs and split there; one hc_mix_split launch with Exact)
// instead of hc_mix, the split, its three interleaving copies and the three
// slices' copies.
func (g *graphInfo) hcMixSplit(ps int, s *ir.Node) *fusion {
	m := s.Args[0]
	pm, ok := g.pos[m]
	if !ok || m.Op != "hc_mix" || len(s.Args) != 3 {
		return nil
	}
	hc := int(s.Attrs.Int("hc", 4))
	mix := (2 + hc) * hc
	if hc < 1 || hc > hcMax || s.Attrs.Int("iters", 20) < 1 {
		return nil
	}
	sh := s.Type.Shape
	if len(sh) == 0 || !sh[len(sh)-1].IsConst() || sh[len(sh)-1].N != int64(mix) {
		return nil
	}
	f := &fusion{kind: "hc_mix_split", nodes: []int{pm, ps}, inner: []int{pm, ps}, role: map[string]int{"mix": pm, "split": ps}}
	parts := map[[2]int64]string{{0, int64(hc)}: "pre", {int64(hc), 2 * int64(hc)}: "post", {2 * int64(hc), int64(mix)}: "comb"}
	for _, r := range g.readers[s] {
		n := g.nodes[r]
		if n.Op != "slice" || axisOf(n, len(sh)) != len(sh)-1 {
			return nil
		}
		part, ok := parts[[2]int64{n.Attrs.Int("start", 0), n.Attrs.Int("end", 0)}]
		if _, dup := f.role[part]; !ok || dup {
			return nil
		}
		f.role[part] = r
		f.nodes = append(f.nodes, r)
	}
	if len(f.nodes) != 5 {
		return nil
	}
	f.run = runHCMixSplit
	return f
}

func runHCMixSplit(c *call, f *fusion, st *runState) error {
	mn, sn := c.p.seg.Nodes[f.role["mix"]], c.p.seg.Nodes[f.role["split"]]
	ma, sa := st.args[f.role["mix"]], st.args[f.role["split"]]
	h, fnv := ma[0], ma[1]
	tokens, hc, D := hcDims(h)
	if hc != int(sn.Attrs.Int("hc", 4)) || fnv.Shape[0] != (2+hc)*hc || fnv.Shape[1] != hc*D {
		return fmt.Errorf("%s: hc fn %v for hc %d, dim %d", what(mn), fnv.Shape, hc, D)
	}
	fn, err := c.values(fnv)
	if err != nil {
		return err
	}
	scale, err := c.values(sa[1])
	if err != nil {
		return err
	}
	base, err := c.values(sa[2])
	if err != nil {
		return err
	}
	pre, post, comb := st.vals[f.role["pre"]], st.vals[f.role["post"]], st.vals[f.role["comb"]]
	return c.k.HCMixSplit(c.st, what(mn), pre.Ptr, post.Ptr, comb.Ptr, h.Ptr, tokens, hc, D, fn, float32(mn.Attrs.Float("eps", 0)),
		scale, base, int(sn.Attrs.Int("iters", 20)), float32(sn.Attrs.Float("eps", 0)))
}

// pnqSplit spreads a decode row of pre_norm_quant over blocks
// (PreNormQuant); DS4_CUDA_PNQ_SPLIT=0 keeps one block a row, to compare.
var pnqSplit = os.Getenv("DS4_CUDA_PNQ_SPLIT") != "0"

// preNormMaxDim is the widest row pre_norm_quant holds in shared memory
// (4·dim bytes beside torch_sum_block's 8 KiB, within the 48 KiB a block
// gets without opting in).
const preNormMaxDim = 8192

// preNormThreads is pre_norm_quant's block for rows of dim: a quarter as
// many threads as elements (whole warps, at least 128), at most 1024, so a
// thread holds at most PNQ_PER (12) elements.
func preNormThreads(dim int) int {
	return min(1024, max(128, ceilDiv(ceilDiv(dim, 4), 32)*32))
}

// preNormQuant is [hc_pre →] rmsnorm [→ act_quant | fp4_quant of its value,
// through views]: one pre_norm_quant launch. The rmsnorm's value is always
// written (other nodes read it: the gate, the compressor, probes). The
// widest run that passes the checks is taken: all three, then without the
// quantiser (work queued before it), then without hc_pre.
func (g *graphInfo) preNormQuant(pr int, r *ir.Node) *fusion {
	sh := r.Type.Shape
	if r.Type.DType != ir.BF16 || len(sh) == 0 || !sh[len(sh)-1].IsConst() || len(r.Args) != 2 {
		return nil
	}
	dim := int(sh[len(sh)-1].N)
	if dim < 1 || dim > preNormMaxDim {
		return nil
	}
	ph, pq := -1, -1
	if h := r.Args[0]; h.Op == "hc_pre" && len(h.Args) == 2 {
		if p, ok := g.pos[h]; ok {
			ph = p
		}
	}
	for _, q := range g.readsVia(r) {
		n := g.nodes[q]
		if (n.Op != "act_quant" && n.Op != "fp4_quant") || root(n.Args[0]) != r || n.Type.DType != ir.BF16 {
			continue
		}
		block := int(n.Attrs.Int("block", 32))
		if block < 1 || block > 32 || block&(block-1) != 0 || dim%block != 0 || (n.Op == "fp4_quant" && block < 2) {
			continue
		}
		pq = q
		break
	}
	for _, c := range [][2]int{{ph, pq}, {ph, -1}, {-1, pq}} {
		if c[0] < 0 && c[1] < 0 {
			continue
		}
		f := &fusion{kind: "pre_norm_quant", nodes: []int{pr}, role: map[string]int{"norm": pr}, run: runPreNormQuant}
		if c[0] >= 0 {
			f.nodes, f.inner, f.role["pre"] = append(f.nodes, c[0]), []int{c[0]}, c[0]
		}
		if c[1] >= 0 {
			f.nodes, f.role["quant"] = append(f.nodes, c[1]), c[1]
		}
		if c[0] < 0 { // rows of x are read before any row is written: the outputs may be x's buffer
			f.alias = func(i int, a *ir.Node, k int) bool { return i == pr && a == r.Args[0] }
		}
		if g.check(f) {
			return f
		}
	}
	return nil
}

func runPreNormQuant(c *call, f *fusion, st *runState) error {
	pr := f.role["norm"]
	rn := c.p.seg.Nodes[pr]
	ra := st.args[pr]
	norm := st.vals[pr]
	dim := last(norm)
	rows := norm.Numel() / max(dim, 1)
	w, err := c.values(ra[1])
	if err != nil {
		return err
	}
	var x, pre driver.Ptr
	hc, preStride := 0, 0
	if ph, ok := f.role["pre"]; ok {
		h, pv := st.args[ph][0], st.args[ph][1]
		tokens, n, D := hcDims(h)
		if tokens != rows || D != dim {
			return fmt.Errorf("%s: stream %v for rows of %d", what(c.p.seg.Nodes[ph]), h.Shape, dim)
		}
		if pre, err = c.values(pv); err != nil {
			return err
		}
		hc, preStride = n, n
		if pv.Numel() != tokens*n { // one mix for every token (a constant [hc])
			if pv.Numel() < n {
				return fmt.Errorf("%s: pre mix of %d values for hc %d", what(c.p.seg.Nodes[ph]), pv.Numel(), n)
			}
			pre, preStride = offset(pre, pv.Numel()-n, ir.F32), 0
		}
		x = h.Ptr
	} else {
		xv := ra[0]
		if xv.Numel() != rows*dim {
			return fmt.Errorf("%s: input %v for rows of %d", what(rn), xv.Shape, dim)
		}
		x = xv.Ptr
	}
	var q driver.Ptr
	qkind, block := 0, 32
	if pq, ok := f.role["quant"]; ok {
		qn := c.p.seg.Nodes[pq]
		q, block = st.vals[pq].Ptr, int(qn.Attrs.Int("block", 32))
		qkind = 1
		if qn.Op == "fp4_quant" {
			qkind = 2
			if qn.Attrs.Str("scale", "e8m0") == "e4m3" {
				qkind = 3
			}
		}
	}
	return c.k.PreNormQuant(c.st, what(rn), norm.Ptr, q, x, pre, preStride, hc, w, rows, dim, float32(rn.Attrs.Float("eps", 0)), qkind, block)
}

// gateTail is the sqrt-softplus gate after its logits L: softplus(L) →
// sqrt (s) → add bias → topk_idx; gather(s, idx) → sum → add_scalar → div
// → mul_scalar (the weights): one gate_tail launch instead of nine. The
// indices and the weights are its outputs; the rest is never made.
func (g *graphInfo) gateTail(pt int, t *ir.Node) *fusion {
	k := t.Attrs.Int("k", 1)
	if k < 1 || k > gateTailMaxTopk || t.Type.DType != ir.I64 {
		return nil
	}
	ad := t.Args[0]
	if ad.Op != "add" || len(ad.Args) != 2 {
		return nil
	}
	sq, bias := ad.Args[0], ad.Args[1]
	if sq.Op != "sqrt" || sq.Args[0].Op != "softplus" || len(bias.Type.Shape) != 1 {
		return nil
	}
	sp := sq.Args[0]
	lsh := sp.Args[0].Type.Shape
	if len(lsh) != 2 || !lsh[1].IsConst() || bias.Type.Shape[0] != lsh[1] || lsh[1].N < k {
		return nil
	}
	for _, n := range []*ir.Node{sp, sq, ad, bias} {
		if n.Type.DType != ir.F32 {
			return nil
		}
	}
	// gather(s, idx) → sum → add_scalar → div(gather, ·) → mul_scalar
	next := func(n *ir.Node, op string) *ir.Node {
		var found *ir.Node
		for _, r := range g.readsVia(n) {
			if m := g.nodes[r]; m.Op == op {
				if found != nil {
					return nil
				}
				found = m
			}
		}
		return found
	}
	ga := next(sq, "gather")
	if ga == nil || ga.Args[0] != sq || root(ga.Args[1]) != t {
		return nil
	}
	su := next(ga, "sum")
	if su == nil || su.Args[0] != ga || axisOf(su, 2) != 1 || !su.Attrs.Bool("keepdim", true) {
		return nil
	}
	as := next(su, "add_scalar")
	dv := next(ga, "div")
	if as == nil || dv == nil || as.Args[0] != su || dv.Args[0] != ga || dv.Args[1] != as {
		return nil
	}
	ms := next(dv, "mul_scalar")
	if ms == nil || ms.Args[0] != dv {
		return nil
	}
	for _, n := range []*ir.Node{ga, su, as, dv, ms} {
		if n.Type.DType != ir.F32 {
			return nil
		}
	}
	f := &fusion{kind: "gate_tail", role: map[string]int{"softplus": g.pos[sp], "add": g.pos[ad], "topk": pt, "weights": g.pos[ms],
		"add_scalar": g.pos[as], "mul_scalar": g.pos[ms]}, run: runGateTail}
	for _, n := range []*ir.Node{sp, sq, ad, t, ga, su, as, dv, ms} {
		p, ok := g.pos[n]
		if !ok {
			return nil
		}
		f.nodes = append(f.nodes, p)
		if n != t && n != ms {
			f.inner = append(f.inner, p)
		}
	}
	return f
}

// gateTailMaxTopk is gate_tail's GATE_TAIL_MAX_TOPK.
const gateTailMaxTopk = 32

func runGateTail(c *call, f *fusion, st *runState) error {
	nodes := c.p.seg.Nodes
	lv := st.args[f.role["softplus"]][0]
	bias, err := c.values(st.args[f.role["add"]][1])
	if err != nil {
		return err
	}
	lg, err := c.values(lv)
	if err != nil {
		return err
	}
	tn := nodes[f.role["topk"]]
	e, k := last(lv), int(tn.Attrs.Int("k", 1))
	return c.k.GateTail(c.st, what(tn), st.vals[f.role["topk"]].Ptr, st.vals[f.role["weights"]].Ptr, lg, bias, rows(lv), e, k,
		float32(nodes[f.role["add_scalar"]].Attrs.Float("value", 0)), float32(nodes[f.role["mul_scalar"]].Attrs.Float("value", 0)))
}

// GateTail is the gate's chain after its logits [rows, e] (gate_tail): the
// top-k ids (int64) of sqrt(softplus(logits)) + bias and their weights
// sqrt(softplus(·))[ids] / (Σ + add) · mul, [rows, k] each.
func (k *Kernels) GateTail(s *driver.Stream, what string, idx, weights, logits, bias driver.Ptr, rows, e, topk int, add, mul float32) error {
	if topk < 1 || topk > gateTailMaxTopk || topk > e || 8*e > 48<<10 {
		return fmt.Errorf("cuda gate_tail: top-%d of %d experts not supported", topk, e)
	}
	return k.launch(s, "gate_tail", what, driver.Dim3{X: uint32(rows), Y: 1, Z: 1}, driver.Dim3{X: 512, Y: 1, Z: 1}, 8*e,
		driver.P(idx), driver.P(weights), driver.P(logits), driver.P(bias), driver.I(e), driver.I(topk), driver.F(add), driver.F(mul))
}

// routedSwiGLU is expert_matmul(x, w1, idx) [→ cast to f32],
// expert_matmul(x, w3, idx) [→ cast to f32] → swiglu_clamp(g, u [, route
// weights]): one MatmulRoutedSwiGLU launch (gemv.go) instead of five. A
// cast of the bf16 products to f32 keeps their values (the buffers hold
// fp32 already), so swiglu_clamp reads what the fused kernel computes.
func (g *graphInfo) routedSwiGLU(psw int, sw *ir.Node) *fusion {
	if len(sw.Args) < 2 || sw.Type.DType != ir.BF16 {
		return nil
	}
	f := &fusion{kind: "routed_swiglu", nodes: []int{psw}, role: map[string]int{"swiglu": psw}, run: runRoutedSwiGLU}
	mm, ok := g.swigluProducts(f, sw, func(a *ir.Node) bool {
		return a.Op == "expert_matmul" && len(a.Args) == 3 && a.Type.DType == ir.BF16
	})
	if !ok || mm[0] == mm[1] || root(mm[0].Args[0]) != root(mm[1].Args[0]) || root(mm[0].Args[2]) != root(mm[1].Args[2]) {
		return nil
	}
	return f
}

// swigluProducts adds to f the two products sw (swiglu_clamp) takes, each
// through its cast to f32 if there is one, as inner nodes with roles w1 and
// w3; false when an argument is not such a product (product says which).
func (g *graphInfo) swigluProducts(f *fusion, sw *ir.Node, product func(*ir.Node) bool) ([2]*ir.Node, bool) {
	var mm [2]*ir.Node
	for k, a := range sw.Args[:2] {
		if a.Op == "cast" && a.Type.DType == ir.F32 && a.Args[0].Type.DType == ir.BF16 {
			p, ok := g.pos[a]
			if !ok {
				return mm, false
			}
			f.nodes, f.inner = append(f.nodes, p), append(f.inner, p)
			a = a.Args[0]
		}
		p, ok := g.pos[a]
		if !ok || !product(a) {
			return mm, false
		}
		f.nodes, f.inner = append(f.nodes, p), append(f.inner, p)
		f.role[[]string{"w1", "w3"}[k]] = p
		mm[k] = a
	}
	return mm, true
}

func runRoutedSwiGLU(c *call, f *fusion, st *runState) error {
	a1, a3, as := st.args[f.role["w1"]], st.args[f.role["w3"]], st.args[f.role["swiglu"]]
	x, w1, w3, idx := a1[0], a1[1], a3[1], a1[2]
	if w1.W == nil || w1.W.Routed == nil || w3.W == nil || w3.W.Routed == nil {
		return fmt.Errorf("%s: the weight is not an expert stack", what(c.p.seg.Nodes[f.role["w1"]]))
	}
	if fmt.Sprint(w1.Shape) != fmt.Sprint(w3.Shape) || len(idx.Shape) != 2 {
		return fmt.Errorf("%s: expert stacks %v and %v", what(c.p.seg.Nodes[f.role["w3"]]), w1.Shape, w3.Shape)
	}
	N, k := idx.Shape[0], idx.Shape[1]
	O, K := w1.Shape[1], w1.Shape[2]
	adiv := k // one token's input for its k experts
	if len(x.Shape) == 3 {
		adiv = 1 // an input per (token, expert)
	}
	var rw driver.Ptr
	if len(as) > 2 {
		rw = as[2].Ptr
	}
	sw := c.p.seg.Nodes[f.role["swiglu"]]
	limit := float32(sw.Attrs.Float("limit", 0))
	if p := f.role["swiglu"]; c.k.routedTC(fakeQuantised(c.p.seg.Nodes[f.role["w1"]].Args[0]), N*k, adiv, K, O) {
		// prefill: the two grouped products (one grouping) into scratch, then
		// swiglu_clamp on them
		rg, codes, scales, err := c.routeInputs(p, x, idx, N*k, adiv, K, w1.W.Routed.Experts)
		if err != nil {
			return err
		}
		gu, err := c.scratch(p, 2, int64(2*4*N*k*O))
		if err != nil {
			return err
		}
		gp, up := gu, gu+driver.Ptr(4*N*k*O)
		if err := c.k.MatmulRoutedTC(c.st, what(sw), gp, codes, scales, adiv, K, *w1.W.Routed, O, rg, N*k); err != nil {
			return err
		}
		if err := c.k.MatmulRoutedTC(c.st, what(sw), up, codes, scales, adiv, K, *w3.W.Routed, O, rg, N*k); err != nil {
			return err
		}
		return c.k.SwiGLUClamp(c.st, what(sw), st.vals[p].Ptr, gp, up, N*k, O, limit, rw)
	}
	return c.k.MatmulRoutedSwiGLU(c.st, what(sw), st.vals[f.role["swiglu"]].Ptr, x.Ptr, adiv, K, *w1.W.Routed, *w3.W.Routed, O, idx.Ptr, N*k,
		limit, rw)
}

// sharedSwiGLU is matmul_fp8(x, w1) [→ cast to f32], matmul_fp8(x, w3)
// [→ cast to f32] → swiglu_clamp(g, u [, weights]) on one x: the shared
// expert's gate and up projections. Calls of at most gemvMaxRows rows take
// one launch of the routed SwiGLU pair kernel over a stack of one expert
// (each row's id 0: the rows of w1 and w3 read together, the SwiGLU in its
// epilogue) instead of four; larger calls (prefill) run unfused.
func (g *graphInfo) sharedSwiGLU(psw int, sw *ir.Node) *fusion {
	if len(sw.Args) < 2 || sw.Type.DType != ir.BF16 {
		return nil
	}
	f := &fusion{kind: "shared_swiglu", nodes: []int{psw}, role: map[string]int{"swiglu": psw}, run: runSharedSwiGLU,
		when: func(c *call) bool { return !c.k.Exact && c.B*c.S <= gemvMaxRows }}
	mm, ok := g.swigluProducts(f, sw, func(a *ir.Node) bool {
		return a.Op == "matmul_fp8" && len(a.Args) == 2 && a.Type.DType == ir.BF16 && a.Args[1].Type.DType == ir.F8E4M3
	})
	if !ok || mm[0] == mm[1] || root(mm[0].Args[0]) != root(mm[1].Args[0]) || !mm[0].Args[1].Type.Equal(mm[1].Args[1].Type) {
		return nil
	}
	return f
}

func runSharedSwiGLU(c *call, f *fusion, st *runState) error {
	p1, p3, psw := f.role["w1"], f.role["w3"], f.role["swiglu"]
	x, w1, w3 := st.args[p1][0], st.args[p1][1], st.args[p3][1]
	for _, w := range []*Value{w1, w3} {
		if w.W == nil || w.W.Kind != LayoutQuant || w.DType != ir.F8E4M3 {
			return fmt.Errorf("%s: the weight is not a block-scaled fp8 matrix", what(c.p.seg.Nodes[p1]))
		}
	}
	N, K, m := w1.Shape[0], w1.Shape[1], rows(x)
	var rw driver.Ptr
	if as := st.args[psw]; len(as) > 2 {
		rw = as[2].Ptr
	}
	sw := c.p.seg.Nodes[psw]
	out, limit := st.vals[psw].Ptr, float32(sw.Attrs.Float("limit", 0))
	if ok, err := c.k.MatmulSharedSwiGLU(c.st, what(sw), out, x.Ptr, m, K, w1.Ptr, w1.W.Scale, w3.Ptr, w3.W.Scale, N, limit, rw); ok || err != nil {
		return err
	}
	// the shape does not take the tensor-core kernel: the unfused launches
	gu, err := c.scratch(psw, 0, int64(8*m*N))
	if err != nil {
		return err
	}
	g, u := gu, gu+driver.Ptr(4*m*N)
	if err := c.k.MatmulFP8(c.st, what(c.p.seg.Nodes[p1]), g, x.Ptr, m, K, w1.Ptr, w1.W.Scale, N); err != nil {
		return err
	}
	if err := c.k.MatmulFP8(c.st, what(c.p.seg.Nodes[p3]), u, x.Ptr, m, K, w3.Ptr, w3.W.Scale, N); err != nil {
		return err
	}
	return c.k.SwiGLUClamp(c.st, what(sw), out, g, u, m, N, limit, rw)
}

// hc_mix_split_wide's sizes (fused.cuh: HCW_STRIDE, HCW_MAX_MIX) and the
// shared memory it takes at most.
const (
	hcWideStride = 1024 + 4
	hcWideMaxMix = 24
	hcWideShared = 2 * (hcWideMaxMix + 1) * hcWideStride * 4
)

// hcWide lets HCMixSplit take hc_mix_split_wide where it applies (the
// benchmarks compare both).
var hcWide = true

// HCMixSplit is hc_mix + hc_split_sinkhorn: h [tokens, hc, dim], fn
// [(2+hc)·hc, hc·dim]; pre, post [tokens, hc], comb [tokens, hc, hc], as
// HCMixes then HCSplitSinkhorn write them. Two launches: hc_mixes_fast
// (HCMixes' mixes, a block per (token, mix)) leaves the mixes in pre, post
// and comb themselves, and hc_sinkhorn_slots turns them into the split in
// place. Exact: one hc_mix_split[_wide] launch, cpu-ref's fp32 order.
func (k *Kernels) HCMixSplit(s *driver.Stream, what string, pre, post, comb, h driver.Ptr, tokens, hc, dim int, fn driver.Ptr, normEps float32,
	scale, base driver.Ptr, iters int, eps float32) error {
	if hc < 1 || hc > hcMax || iters < 1 {
		return fmt.Errorf("cuda hc_mix_split: hc %d (1..%d) or iters %d (>= 1) not supported", hc, hcMax, iters)
	}
	if !k.Exact {
		err := k.launch(s, "hc_mixes_fast", what, driver.Dim3{X: uint32(tokens), Y: uint32((2 + hc) * hc), Z: 1}, driver.Dim3{X: hcFastThreads, Y: 1, Z: 1}, 0,
			driver.P(pre), driver.I(hc), driver.P(post), driver.I(hc), driver.P(comb), driver.I(hc*hc),
			driver.P(h), driver.I(hc*dim), driver.P(fn), driver.I(hc), driver.F(normEps))
		if err != nil {
			return err
		}
		if hc == 4 { // a warp per token (the same bits)
			g, b := grid1(32 * tokens)
			return k.launch(s, "hc_sinkhorn_slots4", what, g, b, 0, driver.P(pre), driver.P(post), driver.P(comb), driver.I(tokens),
				driver.P(scale), driver.P(base), driver.I(iters), driver.F(eps))
		}
		g, b := grid1(tokens)
		return k.launch(s, "hc_sinkhorn_slots", what, g, b, 0, driver.P(pre), driver.P(post), driver.P(comb), driver.I(tokens), driver.I(hc),
			driver.P(scale), driver.P(base), driver.I(iters), driver.F(eps))
	}
	name, shmem := "hc_mix_split", 0
	if _, ok := k.fn["hc_mix_split_wide"]; ok && hcWide && (2+hc)*hc <= hcWideMaxMix && (hc*dim)%4 == 0 && hc*dim >= 32 {
		name, shmem = "hc_mix_split_wide", 2*((2+hc)*hc+1)*hcWideStride*4
	}
	return k.launch(s, name, what, driver.Dim3{X: uint32(tokens), Y: 1, Z: 1}, driver.Dim3{X: 256, Y: 1, Z: 1}, shmem,
		driver.P(pre), driver.P(post), driver.P(comb), driver.P(h), driver.I(hc*dim), driver.P(fn), driver.I(hc), driver.F(normEps),
		driver.P(scale), driver.P(base), driver.I(iters), driver.F(eps))
}

// PreNormQuant is [HCPre →] RMSNorm [→ ActQuant (qkind 1) | FP4ActQuant
// ue8m0 (2) or e4m3 (3)] in one launch (pre_norm_quant), one row per
// block: hc 0 reads rows of x [rows, dim], else the stream x [rows, hc,
// dim] mixed by pre (preStride hc, or 0: one mix for all rows). norm and q
// receive RMSNorm's and the quantiser's values; q may be 0 (qkind 0).
func (k *Kernels) PreNormQuant(s *driver.Stream, what string, norm, q, x, pre driver.Ptr, preStride, hc int, w driver.Ptr, rows, dim int, eps float32, qkind, block int) error {
	if dim < 1 || dim > preNormMaxDim || (qkind != 0 && (block < 1 || block > 32 || block&(block-1) != 0 || dim%block != 0)) {
		return fmt.Errorf("cuda pre_norm_quant: rows of %d (at most %d) in blocks of %d", dim, preNormMaxDim, block)
	}
	// A few rows' element steps are spread over blocks (grid y = the
	// steps; each block computes its row and sum, the same bits): no
	// faster while the host set the decode step's pace, faster in every
	// round on an H100 once graphs made the step GPU-bound (bench/README,
	// twelfth session; an earlier form of the kernel ran slower split on
	// the H200, 8.9 against 6.9 µs a call, not measured there since);
	// DS4_CUDA_PNQ_SPLIT=0 launches one block a row.
	// (The kernel is __launch_bounds__(1024, 1): with the bound alone ptxas
	// of CUDA 13 held it to 32 registers, 232 bytes of stack and 308 of
	// spill stores; one block an SM lets it take 64, 24 bytes of stack.)
	T, y := preNormThreads(dim), 1
	if pnqSplit && rows <= gemvMaxRows && norm != x && q != x {
		y = ceilDiv(dim, T)
	}
	return k.launch(s, "pre_norm_quant", what, driver.Dim3{X: uint32(rows), Y: uint32(y), Z: 1}, driver.Dim3{X: uint32(T), Y: 1, Z: 1}, 4*dim,
		driver.P(norm), driver.P(q), driver.P(x), driver.P(pre), driver.I(preStride), driver.I(hc), driver.P(w), driver.I(dim),
		driver.F(eps), driver.I(qkind), driver.I(block))
}
