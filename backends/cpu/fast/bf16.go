package fast

import (
	"bytes"
	"math"
	"sync"

	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/internal/numfmt"
)

// This file holds the kernels of weights kept as stored in bf16 (raw
// little-endian bytes, 2 per value) and of the fp8 wo_a of the grouped
// output LoRA: they widen or dequantise on the fly and are bit-identical to
// the f32 kernels on the widened (dequantised) weights.

// bf16At returns the f32 value of the bf16 stored at b[2i:2i+2].
func bf16At(b []byte, i int) float32 {
	return math.Float32frombits(uint32(b[2*i])<<16 | uint32(b[2*i+1])<<24)
}

// WidenBF16 writes the f32 values of the raw bf16 bytes src (2 per value)
// to dst.
func WidenBF16(dst []float32, src []byte) {
	check("WidenBF16", len(src), 2*len(dst))
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(src[2*i])<<16 | uint32(src[2*i+1])<<24)
	}
}

// dotGoBF16 is dotGo with b as raw bf16 (same order).
func dotGoBF16(a []float32, b []byte) float32 {
	b = b[:2*len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * bf16At(b, i)
		s1 += a[i+1] * bf16At(b, i+1)
		s2 += a[i+2] * bf16At(b, i+2)
		s3 += a[i+3] * bf16At(b, i+3)
	}
	for ; i < len(a); i++ {
		s0 += a[i] * bf16At(b, i)
	}
	return (s0 + s1) + (s2 + s3)
}

// dotBF16 returns ks.dot(a, widen(b)) bit for bit.
func (ks *kernelSet) dotBF16(a []float32, b []byte) float32 {
	if ks.dotW16 != nil {
		return ks.dotW16(a, b)
	}
	pb := getBuf(len(a))
	WidenBF16(*pb, b)
	v := ks.dot(a, *pb)
	putBuf(pb)
	return v
}

// MatmulF32W16 is MatmulF32 with w [n,k] given as raw bf16 bytes; the
// result is bit-identical to MatmulF32 on the widened weights.
func MatmulF32W16(out, a []float32, w []byte, m, k, n int) {
	matmulW16("MatmulF32W16", out, a, w, m, k, n, false, rowsAuto)
}

// MatmulBF16W16 is MatmulBF16 with w [n,k] given as raw bf16 bytes
// (bit-identical to MatmulBF16 on the widened weights).
func MatmulBF16W16(out, a []float32, w []byte, m, k, n int) {
	matmulW16("MatmulBF16W16", out, a, w, m, k, n, true, rowsAuto)
}

// GroupedLoRA is kernels.GroupedLoRA:
//
//	out[i, g*rank+r] = bf16( Σ_d o[i, g*dg+d] · woA[g*rank+r, d] )
//
// The weights are either f32 (woA [groups*rank, dg]) or, when woA is nil,
// e4m3 codes [groups*rank, dg] with e8m0 block scales [ceil(groups*rank/32),
// ceil(dg/32)], dequantised on the fly as bf16(e4m3·e8m0) (the binder's
// former dequantisation). Stored codes whose dequantised values are normal
// floats (every scale byte in 10..134) and a rank of whole 32-row scale
// groups run as one fp8 matmul per group (MatmulFP8's numerics: per-block
// partials, equal to the sequential sum up to fp32 rounding; decode's
// groups stream as one parallel job). Otherwise the result is bit for bit
// the reference's sequential sum in ascending d from +0, every product
// rounded to fp32, 32 outputs of a group at once in vector lanes.
func GroupedLoRA(out, o []float32, m, groups, dg int, woA []float32, codes, scales []byte, rank int) {
	groupedLoRARows(out, o, m, groups, dg, woA, codes, scales, rank, rowsAuto)
}

// groupedLoRARows is GroupedLoRA with the kernels mode picks.
func groupedLoRARows(out, o []float32, m, groups, dg int, woA []float32, codes, scales []byte, rank int, mode rowMode) {
	rows := groups * rank
	check("GroupedLoRA", len(out), m*rows, len(o), m*groups*dg)
	kbs := ceilDiv(dg, block)
	if woA != nil {
		check("GroupedLoRA", len(woA), rows*dg)
	} else {
		check("GroupedLoRA", len(codes), rows*dg, len(scales), ceilDiv(rows, block)*kbs)
	}
	if m == 0 || rows == 0 {
		return
	}
	if codes != nil && rank%block == 0 && loraExact(scales) {
		groupedFP8(out, o, m, groups, dg, codes, scales, rank, mode)
		return
	}
	const lw = 32
	chunks := ceilDiv(rank, lw)
	ks := current()
	if codes != nil && ks.loraFP8x8 != nil && mode.stream(m, loraDirectMaxM) && rank%8 == 0 && dg%block == 0 && loraExact(scales) {
		// few tokens: dequantise and transpose 8×8 tiles in registers
		// instead of building panels
		parallel(groups*chunks, func(it int) {
			g, r0 := it/chunks, (it%chunks)*lw
			nr := min(lw, rank-r0)
			var acc [16]float32
			for r := r0; r < r0+nr; {
				row := g*rank + r
				nw := 8 // rows per call: 16 when they stay in the 32-row scale group
				if r+16 <= r0+nr && row%block <= block-16 {
					nw = 16
				}
				r += nw
				srow := scales[(row/block)*kbs : (row/block+1)*kbs]
				for i := range m {
					x := o[(i*groups+g)*dg : (i*groups+g+1)*dg]
					dst := out[i*rows+row : i*rows+row+nw]
					if ks.loraFP8x8(x, codes[row*dg:], dg, srow, dg/block, acc[:nw]) {
						// a NaN code: the reference arithmetic, in Go
						for l := range dst {
							crow := codes[(row+l)*dg : (row+l+1)*dg]
							var sum float32
							for d, v := range x {
								wv := numfmt.BF16Round(lutE4M3[crow[d]] * lutE8M0[srow[d/block]])
								sum += float32(v * wv)
							}
							dst[l] = numfmt.BF16Round(sum)
						}
						continue
					}
					for l := range dst {
						dst[l] = numfmt.BF16Round(acc[l])
					}
				}
			}
		})
		return
	}
	parallel(groups*chunks, func(it int) {
		g, r0 := it/chunks, (it%chunks)*lw
		nr := min(lw, rank-r0)
		pb := getBuf(dg * lw)
		p := *pb
		if nr < lw {
			clear(p)
		}
		// panel p[d*lw+l] = weight of output row g*rank+r0+l at d.
		for l := range nr {
			row := g*rank + r0 + l
			if woA != nil {
				for d, v := range woA[row*dg : (row+1)*dg] {
					p[d*lw+l] = v
				}
				continue
			}
			srow := scales[(row/block)*kbs : (row/block+1)*kbs]
			crow := codes[row*dg : (row+1)*dg]
			for b, e := range srow {
				cb := crow[b*block : min(dg, (b+1)*block)]
				pb := p[b*block*lw:]
				sc := lutE8M0[e]
				if e < 10 || e > 246 {
					// products may leave the normal range: round as stored
					for d, q := range cb {
						pb[d*lw+l] = numfmt.BF16Round(lutE4M3[q] * sc)
					}
					continue
				}
				// every product is a normal f32 with ≤ 4 significant bits:
				// exact in bf16 (NaN codes give NaN either way)
				for d, q := range cb {
					v := lutE4M3[q] * sc
					if q&0x7F == 0x7F {
						v = numfmt.BF16Round(v)
					}
					pb[d*lw+l] = v
				}
			}
		}
		var acc [lw]float32
		for i := range m {
			x := o[(i*groups+g)*dg : (i*groups+g+1)*dg]
			if ks.lanes32 != nil && dg > 0 {
				ks.lanes32(x, p, dg, acc[:])
			} else {
				lanes32Go(x, p, dg, acc[:])
			}
			dst := out[i*rows+g*rank+r0 : i*rows+g*rank+r0+nr]
			for l := range dst {
				dst[l] = numfmt.BF16Round(acc[l])
			}
		}
		putBuf(pb)
	})
}

// groupedFP8 is GroupedLoRA on stored codes as one fp8 matmul per group:
// o's columns of group g against the group's rank rows of codes (whole
// 32-row scale groups).
func groupedFP8(out, o []float32, m, groups, dg int, codes, scales []byte, rank int, mode rowMode) {
	kbs := ceilDiv(dg, block)
	rows := groups * rank
	ws := make([]weights, groups)
	for g := range ws {
		ws[g] = weights{kind: kindFP8, n: rank, k: dg, q: codes[g*rank*dg : (g+1)*rank*dg],
			s: scales[g*rank/block*kbs : (g+1)*rank/block*kbs], kb: kbs}
	}
	// each group's activation rows and outputs, contiguous
	xs, outs := make([][]float32, groups), make([][]float32, groups)
	var bufs []*[]float32
	for g := range groups {
		if m == 1 {
			xs[g], outs[g] = o[g*dg:(g+1)*dg], out[g*rank:(g+1)*rank]
			continue
		}
		xb, ob := getBuf(m*dg), getBuf(m*rank)
		bufs = append(bufs, xb, ob)
		xs[g], outs[g] = *xb, *ob
		for i := range m {
			copy(xs[g][i*dg:(i+1)*dg], o[(i*groups+g)*dg:(i*groups+g+1)*dg])
		}
	}
	if mode.stream(m, decodeMaxM) {
		ks := current()
		tasks := make([]func(int), groups)
		chunks := 0
		var releases []func()
		for g := range groups {
			task, n, release := decodeTasks(ks, outs[g], xs[g], m, &ws[g], true, nil)
			tasks[g], chunks = task, n
			releases = append(releases, release)
		}
		parallel(groups*chunks, func(c int) { tasks[c/chunks](c % chunks) })
		for _, r := range releases {
			r()
		}
	} else {
		for g := range groups {
			matmul(outs[g], xs[g], m, &ws[g], true)
		}
	}
	if m > 1 {
		for g := range groups {
			for i := range m {
				copy(out[i*rows+g*rank:i*rows+(g+1)*rank], outs[g][i*rank:(i+1)*rank])
			}
		}
		for _, b := range bufs {
			putBuf(b)
		}
	}
}

// loraDirectMaxM is the most tokens for which GroupedLoRA dequantises e4m3
// tiles in registers per token rather than once into panels.
const loraDirectMaxM = 8

// loraExact reports whether every dequantised weight bf16(e4m3·e8m0) of a
// non-NaN code is the normal f32 that loraFP8x8AVX2 computes: scale bytes
// in 10..134.
func loraExact(scales []byte) bool {
	for _, e := range scales {
		if e < 10 || e > maxFP8Scale {
			return false
		}
	}
	return true
}

// fp8Exact reports whether the bit-placing dequantisation of the e4m3
// codes with the scale bytes s (e4m3·2^-120 times 2^(s−7)) equals
// e4m3·e8m0 everywhere: scale bytes ≤ maxFP8Scale and no NaN code.
func fp8Exact(codes, s []byte) bool {
	for _, e := range s {
		if e > maxFP8Scale {
			return false
		}
	}
	return bytes.IndexByte(codes, 0x7F) < 0 && bytes.IndexByte(codes, 0xFF) < 0
}

// lanes32Go is lanes32AVX2 in Go.
func lanes32Go(x, p []float32, n int, out []float32) {
	var acc [32]float32
	for d := range n {
		xd := x[d]
		row := p[d*32 : d*32+32 : d*32+32]
		for l := range acc {
			acc[l] += float32(xd * row[l])
		}
	}
	copy(out, acc[:])
}

// hcLanesMinTokens is the fewest tokens for which HCMixes builds the
// transposed panel of fn (once per call) and runs the lane kernel.
const hcLanesMinTokens = 8

// HCMixes is kernels.HCMixes, bit for bit: the mix dots of a token (each
// the reference's sequential fp32 sum) run in vector lanes against fn
// transposed once per call (or, for fewer than hcLanesMinTokens tokens,
// against the panels cached in panels when it is not nil); the norm factor
// is the reference's.
func HCMixes(out []float32, h []float32, tokens, hc, dim int, fn []float32, eps float32, panels *HCPanels) {
	mix, n := (2+hc)*hc, hc*dim
	ks := current()
	if tokens < hcLanesMinTokens && panels != nil && ks.lanes4 != nil && n > 0 && len(fn) == mix*n {
		hcMixesFew(ks, out, h, tokens, mix, n, fn, eps, panels)
		return
	}
	if tokens < hcLanesMinTokens || ks.lanes32 == nil || mix > 32 || n == 0 {
		kernels.HCMixes(out, h, tokens, hc, dim, fn, eps)
		return
	}
	check("HCMixes", len(out), tokens*mix, len(h), tokens*n, len(fn), mix*n)
	var p []float32
	if panels != nil {
		p = panels.get32(fn, mix, n)
	} else {
		pb := getBuf(n * 32)
		defer putBuf(pb)
		p = lanes32Panel(*pb, fn, mix, n)
	}
	parallel(ceilDiv(tokens, 4), func(c int) {
		var acc [32]float32
		ms, rho := make([]float32, 1), make([]float32, 1)
		for t := c * 4; t < min(tokens, c*4+4); t++ {
			x := h[t*n : (t+1)*n]
			MeanSquare(ms, x, 1, n)
			ms[0] += eps
			kernels.Rsqrt(rho, ms)
			ks.lanes32(x, p, n, acc[:])
			for i := range mix {
				out[t*mix+i] = acc[i] * rho[0]
			}
		}
	})
}

// HCPost is kernels.HCPost, bit for bit: out[t,j,:] = bf16(post[t,j]·y[t,:]
// + Σ_i comb[t,i,j]·res[t,i,:]) with the sum from +0 in ascending i and
// every product rounded to fp32, over whole rows (slices hoisted, one pass
// per output row) instead of index arithmetic per element.
func HCPost(out, y, res, post, comb []float32, tokens, hc, dim int) {
	check("HCPost", len(out), tokens*hc*dim, len(y), tokens*dim, len(res), tokens*hc*dim,
		len(post), tokens*hc, len(comb), tokens*hc*hc)
	if hc != 4 || dim == 0 {
		kernels.HCPost(out, y, res, post, comb, tokens, hc, dim)
		return
	}
	ks := current()
	parallel(tokens*hc, func(u int) {
		t, j := u/hc, u%hc
		base := t * hc * dim
		r0, r1 := res[base:base+dim], res[base+dim:base+2*dim]
		r2, r3 := res[base+2*dim:base+3*dim], res[base+3*dim:base+4*dim]
		c := comb[t*hc*hc : (t+1)*hc*hc]
		c0, c1, c2, c3 := c[j], c[hc+j], c[2*hc+j], c[3*hc+j]
		p := post[t*hc+j]
		yt := y[t*dim : (t+1)*dim]
		o := out[base+j*dim : base+(j+1)*dim]
		d0 := 0
		if ks.hcPost4 != nil {
			d0 = dim &^ 7
			a := argsPool.Get().(*hcArgs)
			a.r, a.c = [4][]float32{r0, r1, r2, r3}, [4]float32{c0, c1, c2, c3}
			ks.hcPost4(o[:d0], &a.r, &a.c, yt, p)
			a.r = [4][]float32{}
			argsPool.Put(a)
		}
		for d := d0; d < dim; d++ {
			var s float32
			s += float32(c0 * r0[d])
			s += float32(c1 * r1[d])
			s += float32(c2 * r2[d])
			s += float32(c3 * r3[d])
			o[d] = numfmt.BF16Round(float32(p*yt[d]) + s)
		}
	})
}

// hcArgs are the operands the hc kernels take by pointer (which makes a
// composite literal escape): recycled, one per task.
type hcArgs struct {
	r [4][]float32
	c [4]float32
}

var argsPool = sync.Pool{New: func() any { return new(hcArgs) }}

// HCPre is kernels.HCPre, bit for bit: out[t,d] = bf16(Σ_i pre[t,i]·h[t,i,d])
// (fp32, i ascending from +0), in vectors for hc = 4.
func HCPre(out, h, pre []float32, tokens, hc, dim int) {
	ks := current()
	if hc != 4 || ks.hcSum4 == nil || dim < 8 {
		kernels.HCPre(out, h, pre, tokens, hc, dim)
		return
	}
	check("HCPre", len(out), tokens*dim, len(h), tokens*hc*dim, len(pre), tokens*hc)
	per := max(1, 8192/dim) // tokens per task
	parallel(ceilDiv(tokens, per), func(c int) {
		a := argsPool.Get().(*hcArgs)
		defer func() { a.r = [4][]float32{}; argsPool.Put(a) }()
		for t := c * per; t < min(tokens, (c+1)*per); t++ {
			base := t * hc * dim
			a.r = [4][]float32{h[base : base+dim], h[base+dim : base+2*dim], h[base+2*dim : base+3*dim], h[base+3*dim : base+4*dim]}
			a.c = [4]float32{pre[t*hc], pre[t*hc+1], pre[t*hc+2], pre[t*hc+3]}
			r, w := &a.r, &a.c
			o := out[t*dim : (t+1)*dim]
			d0 := dim &^ 7
			ks.hcSum4(o[:d0], r, w)
			for d := d0; d < dim; d++ {
				var s float32
				for i := range hc {
					s += float32(w[i] * r[i][d])
				}
				o[d] = numfmt.BF16Round(s)
			}
		}
	})
}

// ActQuant is numfmt.ActQuantInplace(x, block) with the vector kernel of
// the current level for the blocks it takes (bit-identical), blocks spread
// over the threads when there are many.
func ActQuant(x []float32, block int) {
	ks := current()
	if ks.actQuant == nil || block <= 0 || len(x)%block != 0 {
		numfmt.ActQuantInplace(x, block)
		return
	}
	one := func(xb []float32) {
		if !ks.actQuant(xb) {
			numfmt.ActQuantInplace(xb, block)
		}
	}
	blocks := len(x) / block
	const perTask = 64 << 10 // elements per parallel task
	per := max(1, perTask/block)
	if blocks <= per {
		for b := range blocks {
			one(x[b*block : (b+1)*block])
		}
		return
	}
	parallel(ceilDiv(blocks, per), func(c int) {
		for b := c * per; b < min(blocks, (c+1)*per); b++ {
			one(x[b*block : (b+1)*block])
		}
	})
}

// HCPanels caches fn transposed into 4-lane panels [ceil(mix/4)][n][4]
// (zero padded) for HCMixes with few tokens: a decode step's mixes then
// stream panels, each thread its own, instead of one fp32 dot chain per mix
// (and, for many tokens, the 32-lane panel, built once, not per call).
// The CPU backend keeps one per hc_mix node, whose fn is a weight fixed for
// the life of the program; the panel is rebuilt if fn changes.
type HCPanels struct {
	mu  sync.Mutex
	src []float32 // the fn the panel was built from
	p   []float32
	// src32, p32: the same for the 32-lane panel of many tokens
	src32, p32 []float32
}

// get32 is the 32-lane panel of fn [n][32] (mix ≤ 32 mixes, zero padded)
// for HCMixes with many tokens, cached like get's.
func (c *HCPanels) get32(fn []float32, mix, n int) []float32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.p32) == n*32 && len(c.src32) == len(fn) && &c.src32[0] == &fn[0] {
		return c.p32
	}
	c.src32, c.p32 = fn, lanes32Panel(make([]float32, n*32), fn, mix, n)
	return c.p32
}

// lanes32Panel writes fn [mix][n] transposed into p [n][32] (zero padded).
func lanes32Panel(p, fn []float32, mix, n int) []float32 {
	clear(p)
	for i := range mix {
		for c, v := range fn[i*n : (i+1)*n] {
			p[c*32+i] = v
		}
	}
	return p
}

func (c *HCPanels) get(fn []float32, mix, n int) []float32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	size := ceilDiv(mix, 4) * n * 4
	if len(c.p) == size && len(c.src) == len(fn) && &c.src[0] == &fn[0] {
		return c.p
	}
	p := make([]float32, size)
	for i := range mix {
		panel := p[(i/4)*n*4:]
		for col, v := range fn[i*n : (i+1)*n] {
			panel[col*4+i%4] = v
		}
	}
	c.src, c.p = fn, p
	return p
}

// hcMixesFew is HCMixes for a few tokens (decode), bit-identical to the
// reference: each mix the sequential fp32 sum from +0 (lanes4), the norm
// factor the reference's; the 4-lane panels are spread over the threads.
func hcMixesFew(ks *kernelSet, out, h []float32, tokens, mix, n int, fn []float32, eps float32, panels *HCPanels) {
	check("HCMixes", len(out), tokens*mix, len(h), tokens*n)
	p := panels.get(fn, mix, n)
	np := ceilDiv(mix, 4)
	groups := ceilDiv(np, 3) // three panels per task (independent chains)
	rho := make([]float32, tokens)
	acc := make([]float32, tokens*groups*12)
	// one job: the norm factors (task 0 … tokens-1) next to the panel dots
	parallel(tokens+tokens*groups, func(u int) {
		if u < tokens {
			ms := make([]float32, 1)
			MeanSquare(ms, h[u*n:(u+1)*n], 1, n)
			ms[0] += eps
			kernels.Rsqrt(ms, ms)
			rho[u] = ms[0]
			return
		}
		u -= tokens
		t, g := u/groups, u%groups
		var ps [3][]float32
		for k := range 3 {
			q := min(3*g+k, np-1) // a repeated panel fills the last group
			ps[k] = p[q*n*4 : (q+1)*n*4]
		}
		ks.lanes4(h[t*n:(t+1)*n], &ps, n, acc[u*12:(u+1)*12])
	})
	for t := range tokens {
		for i := range mix {
			out[t*mix+i] = acc[(t*groups+i/12)*12+i%12] * rho[t]
		}
	}
}

// SwiGLUClamp is kernels.SwiGLUClamp, bit for bit, with the exps of a chunk
// computed four at a time by the vector kernel (the operations of Go's
// math.Exp); the rest is the reference's per-element step
// (kernels.SwiGLUElement).
func SwiGLUClamp(out, g, u []float32, rows, inter int, limit float32, routeWeight []float32) {
	ks := current()
	n := rows * inter
	if ks.expF32 == nil || ks.swigluGate == nil || ks.swigluElem == nil || inter == 0 {
		kernels.SwiGLUClamp(out, g, u, rows, inter, limit, routeWeight)
		return
	}
	check("SwiGLUClamp", len(out), n, len(g), n, len(u), n)
	if routeWeight != nil {
		check("SwiGLUClamp", len(routeWeight), rows)
	}
	lim := limit // the kernels' clamps: none for limit ≤ 0
	if !(limit > 0) {
		lim = float32(math.Inf(1))
	}
	const chunk = 2048 // elements per task, a multiple of 8
	parallel(ceilDiv(n, chunk), func(c int) {
		j0, j1 := c*chunk, min(n, (c+1)*chunk)
		xb := getBuf(2 * chunk) // (a local array would escape through the kernel funcs)
		defer putBuf(xb)
		x, e := (*xb)[:j1-j0], (*xb)[chunk:chunk+j1-j0]
		n8 := len(x) &^ 7
		ks.swigluGate(x[:n8], g[j0:j0+n8], lim)
		for j := j0 + n8; j < j1; j++ {
			x[j-j0] = -kernels.SwiGLUGate(g[j], limit)
		}
		whole := len(e) &^ 3
		if !ks.expF32(e[:whole], x[:whole]) {
			whole = 0 // an argument beyond the kernel's range: all in Go
		}
		for i := whole; i < len(e); i++ {
			e[i] = float32(math.Exp(float64(x[i])))
		}
		// per row segment (one route weight each): 8 at a time, then Go
		for j := j0; j < j1; {
			row := j / inter
			end := min(j1, (row+1)*inter)
			w, vw := float32(1), float32(0)
			if routeWeight != nil {
				w, vw = routeWeight[row], routeWeight[row]
			}
			s8 := (end - j) &^ 7
			ks.swigluElem(out[j:j+s8], x[j-j0:], e[j-j0:], u[j:], lim, w)
			for k := j + s8; k < end; k++ {
				out[k] = kernels.SwiGLUElement(-x[k-j0], e[k-j0], u[k], limit, vw, routeWeight != nil)
			}
			j = end
		}
	})
}

// BF16RoundSlice is numfmt.BF16RoundSlice (the same bits), in vectors where
// the kernels have it.
func BF16RoundSlice(x []float32) {
	if ks := current(); ks.bf16Round != nil {
		ks.bf16Round(x)
		x = x[len(x)&^7:]
	}
	numfmt.BF16RoundSlice(x)
}
