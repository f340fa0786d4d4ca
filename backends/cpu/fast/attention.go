package fast

import (
	"math"
	"runtime"
	"sync"

	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/internal/numfmt"
)

// SparseAttn is kernels.SparseAttn with its two dot products in f32 (see
// sparseAttnUnitsF32): a work unit is one query position (b, m) with all
// its heads, so that the key rows of an index block are dotted with every
// head's query at once (heads in vector lanes); decode (one position)
// splits the heads over the cores. Without the f32 kernels (portable
// level), or for head dims not a multiple of 8 or head counts not a
// multiple of 4, it runs the reference kernel.
func SparseAttn(out, q []float32, b, m, h, d int, kv []float32, n int, sink []float32, idx []int32, t int, scale float32) {
	SparseAttnSplit(out, q, b, m, h, d, kv, n, nil, 0, sink, idx, t, scale)
}

// SparseAttnSplit is SparseAttn over kv's n rows followed by kv2's n2
// (kernels.SparseAttnSplit), without concatenating them.
func SparseAttnSplit(out, q []float32, b, m, h, d int, kv []float32, n int, kv2 []float32, n2 int, sink []float32, idx []int32, t int, scale float32) {
	ks := current()
	if !sparseAttnF32(ks, h, d) {
		kernels.SparseAttnSplit(out, q, b, m, h, d, kv, n, kv2, n2, sink, idx, t, scale)
		return
	}
	if len(q) < b*m*h*d || len(out) < b*m*h*d || len(kv) < b*n*d || len(kv2) < b*n2*d || len(sink) < h || len(idx) < b*m*t {
		panic("kernels.SparseAttn: buffer too small")
	}
	// (GOMAXPROCS takes the scheduler's lock: asked only for such a call)
	if b*m == 1 && h >= 8 {
		if p := runtime.GOMAXPROCS(0); p > 1 {
			// one query position (decode): split the heads (independent, each
			// with the same operations) into groups of a multiple of 4; q, out
			// and sink of a head range are contiguous
			hg := ceilDiv(ceilDiv(h, 4), p) * 4
			parallel(ceilDiv(h, hg), func(g int) {
				h0, h1 := g*hg, min(h, (g+1)*hg)
				sparseAttnUnitsF32(ks, out[h0*d:h1*d], q[h0*d:h1*d], 1, 1, h1-h0, d, kv, n, kv2, n2, sink[h0:h1], idx, t, scale)
			})
			return
		}
	}
	sparseAttnUnitsF32(ks, out, q, b, m, h, d, kv, n, kv2, n2, sink, idx, t, scale)
}

// sparseAttnF32 reports whether SparseAttn takes the f32 path on ks for
// head count h and head dim d.
func sparseAttnF32(ks *kernelSet, h, d int) bool {
	return ks.qkF32Keys != nil && ks.axpyF32 != nil && d%8 == 0 && h%4 == 0
}

// sparseAttnUnitsF32 runs SparseAttn's work units (one query position
// each) with the reference's numerics except for the two dot products: a
// logit is one FMA chain over the head dim (heads in vector lanes, padded
// to a multiple of 8) and P·V one FMA per term, in the reference's order.
// Everything else (block maxima, exps, bf16 probabilities, the float64 sum
// of the probabilities, the rescaling) is the reference's. A head's results
// do not depend on how heads are grouped, so decode (heads split over the
// cores) and prefill agree bit for bit; against the float64 sums of the
// reference they differ by f32 rounding (≈ 2^-24 relative per dot).
func sparseAttnUnitsF32(ks *kernelSet, out, q []float32, b, m, h, d int, kv []float32, n int, kv2 []float32, n2 int, sink []float32, idx []int32, t int, scale float32) {
	const blkN = kernels.SparseAttnBlock
	negInf := float32(math.Inf(-1))
	h8 := (h + 7) &^ 7
	// P·V of 4 keys for all heads at once where the level has it (the key
	// rows then stay in cache for every head)
	heads := ks.axpyHeads != nil && d%64 == 0
	extra := 0
	if heads {
		extra = h*blkN + h*d + h + 4*h
	}
	parallel(b*m, func(u int) {
		bi, mi := u/m, u%m
		kvb := kernels.KVRows{A: kv[bi*n*d : (bi+1)*n*d], B: kv2[bi*n2*d : (bi+1)*n2*d], NA: n, D: d}
		row := idx[(bi*m+mi)*t : (bi*m+mi+1)*t]
		qs := q[(bi*m+mi)*h*d : (bi*m+mi+1)*h*d]
		// the unit's float scratch from the pool (a query position per unit:
		// prefill has thousands), zeroed where it must start at zero
		fb := getBuf(d*h8 + h*blkN + 2*blkN + h*d + d + 128 + 2*h + extra)
		defer putBuf(fb)
		f := *fb
		take := func(n int) []float32 { v := f[:n:n]; f = f[n:]; return v }
		qT := take(d * h8) // padding lanes stay 0
		if h8 != h {
			clear(qT)
		}
		for hh := range h {
			for i, v := range qs[hh*d : (hh+1)*d] {
				qT[i*h8+hh] = v
			}
		}
		s := take(h * blkN) // s[hh*blkN+j]
		pb, exps := take(blkN), take(blkN)
		acc := take(h * d)
		clear(acc)
		pv, dots := take(d), take(128)
		mu, l := take(h), take(h)
		var pbH, pvH, alphaH []float32
		if heads {
			pbH, pvH, alphaH = take(h*blkN), take(h*d), take(h+4*h)
		}
		clear(l)
		for hh := range mu {
			mu[hh] = float32(-1e30) // attentionInitMax
		}
		var validUse [2 * blkN]int
		valid, use := validUse[:blkN], validUse[blkN:]
		sc := attnArgsPool.Get().(*attnArgs) // (arrays the kernels take by pointer would escape)
		defer sc.put()
		keys, p4, kr := &sc.keys, &sc.p4, &sc.kr
		for t0 := 0; t0 < t; t0 += blkN {
			blk := row[t0:min(t0+blkN, t)]
			nv := 0
			for j, ix := range blk {
				if ix < 0 {
					for hh := range h {
						s[hh*blkN+j] = negInf
					}
					continue
				}
				if int(ix) >= n+n2 {
					panic("kernels.SparseAttn: index out of range")
				}
				valid[nv] = j
				nv++
			}
			if nv == 0 {
				continue // no valid entry: the block changes nothing (see kernels.SparseAttn)
			}
			// logits: 16 heads × 4 keys or 8 heads × 8 keys per call, the
			// last call's missing keys filled with a repeat
			for hh := 0; hh < h && nv > 0; {
				g := 1
				if h8-hh >= 16 {
					g = 2
				}
				nk := 8 / g
				k8 := g == 2 && ks.qkF32K8 != nil
				if k8 {
					nk = 8
				}
				for v0 := 0; v0 < nv; v0 += nk {
					for x := range nk {
						ix := int(blk[valid[min(v0+x, nv-1)]])
						keys[x] = kvb.Row(ix)
					}
					if k8 {
						ks.qkF32K8(qT[hh:], h8, keys, d, dots)
					} else {
						ks.qkF32Keys(qT[hh:], h8, keys, d, dots, g)
					}
					for x := range min(nk, nv-v0) {
						j := valid[v0+x]
						for y := range min(8*g, h-hh) {
							s[(hh+y)*blkN+j] = dots[x*8*g+y] * scale
						}
					}
				}
				hh += 8 * g
			}
			if heads {
				sparseAttnBlockHeads(ks, sc, blk, valid[:nv], s, pbH, pvH, alphaH, exps, mu, l, acc, kvb, h, d)
				continue
			}
			for hh := range h {
				sh := s[hh*blkN : hh*blkN+len(blk)]
				bmax := negInf
				for _, j := range valid[:nv] {
					bmax = max(bmax, sh[j])
				}
				newMu := max(mu[hh], bmax)
				alpha := float32(math.Exp(float64(mu[hh] - newMu)))
				var psum float64
				clear(pv)
				nu := 0
				ex := ks.blockExps(exps[:len(blk)], sh, newMu)
				for j, ix := range blk {
					p := ex[j]
					psum += float64(p)
					pb[j] = numfmt.BF16Round(p)
					if ix < 0 || pb[j] == 0 {
						continue
					}
					use[nu] = j
					nu++
				}
				x := 0
				for ; x+4 <= nu; x += 4 {
					for y := range 4 {
						jy := use[x+y]
						p4[y] = pb[jy]
						kr[y] = kvb.Row(int(blk[jy]))
					}
					ks.axpyF32(pv, p4, kr, 4)
				}
				for ; x < nu; x++ {
					j := use[x]
					p4[0], kr[0] = pb[j], kvb.Row(int(blk[j]))
					ks.axpyF32(pv, p4, kr, 1)
				}
				lh := float32(l[hh]*alpha) + float32(psum)
				l[hh] = lh
				ah := acc[hh*d : (hh+1)*d]
				d8 := 0
				if ks.scaleAdd != nil {
					d8 = d &^ 7
					ks.scaleAdd(ah[:d8], pv, alpha)
				}
				for di := d8; di < d; di++ {
					ah[di] = float32(ah[di]*alpha) + pv[di]
				}
				mu[hh] = newMu
			}
		}
		for hh := range h {
			lh := l[hh] + float32(math.Exp(float64(sink[hh]-mu[hh])))
			o := out[((bi*m+mi)*h+hh)*d : ((bi*m+mi)*h+hh+1)*d]
			for di := range o {
				o[di] = numfmt.BF16Round(acc[hh*d+di] / lh)
			}
		}
	})
}

// attnArgs are the arrays sparse attention hands its kernels by pointer,
// recycled (a unit's, and its blocks' in sparseAttnBlockHeads).
type attnArgs struct {
	keys  [8][]float32
	kr    [4][]float32
	p4    [4]float32
	heads [64]int32
	rest  [64]int
}

var attnArgsPool = sync.Pool{New: func() any { return new(attnArgs) }}

// put returns a to the pool, dropping its references to key rows.
func (a *attnArgs) put() {
	a.keys, a.kr = [8][]float32{}, [4][]float32{}
	attnArgsPool.Put(a)
}

// blockExps sets ex[j] = exp(sh[j] - mu) for the block's logits (the
// whole groups of 4 by ks.expF32 where the level has it, the rest and
// everything else through float64) and returns ex.
func (ks *kernelSet) blockExps(ex, sh []float32, mu float32) []float32 {
	for j := range ex {
		ex[j] = sh[j] - mu
	}
	whole := 0
	if ks.expF32 != nil && ks.expF32(ex[:len(ex)&^3], ex[:len(ex)&^3]) {
		whole = len(ex) &^ 3
	} else {
		for j := range ex {
			ex[j] = sh[j] - mu
		}
	}
	for j := whole; j < len(ex); j++ {
		ex[j] = float32(math.Exp(float64(ex[j])))
	}
	return ex
}

// sparseAttnBlockHeads is the per-head part of sparseAttnUnitsF32's loop
// over one index block with the P·V terms of every head summed together
// (ks.axpyHeads, 4 keys for all heads whose 4 probabilities are non-zero,
// the others key by key): each head gets the same FMAs in the same order as
// with the per-head loop (its non-zero-probability keys in block order), so
// the same bits. s holds the block's logits (s[hh*blkN+j]), valid the
// positions of its non-negative indices.
func sparseAttnBlockHeads(ks *kernelSet, sc *attnArgs, blk []int32, valid []int, s, pbH, pvH, scratch, exps, mu, l, acc []float32, kvb kernels.KVRows, h, d int) {
	const blkN = kernels.SparseAttnBlock
	negInf := float32(math.Inf(-1))
	alphaH, p4s := scratch[:h], scratch[h:h+4*h]
	for hh := range h {
		sh := s[hh*blkN : hh*blkN+len(blk)]
		bmax := negInf
		for _, j := range valid {
			bmax = max(bmax, sh[j])
		}
		newMu := max(mu[hh], bmax)
		alpha := float32(math.Exp(float64(mu[hh] - newMu)))
		ex := ks.blockExps(exps[:len(blk)], sh, newMu)
		var psum float64
		pb := pbH[hh*blkN : hh*blkN+len(blk)]
		for j := range blk {
			p := ex[j]
			psum += float64(p)
			pb[j] = numfmt.BF16Round(p)
		}
		l[hh] = float32(l[hh]*alpha) + float32(psum)
		alphaH[hh] = alpha
		mu[hh] = newMu
	}
	clear(pvH)
	hsBuf, restBuf := sc.heads[:], sc.rest[:]
	kr, p1 := &sc.kr, &sc.p4
	one := func(hh int, j int) {
		p := pbH[hh*blkN+j]
		if p == 0 {
			return
		}
		ix := int(blk[j])
		p1[0], kr[0] = p, kvb.Row(ix)
		ks.axpyF32(pvH[hh*d:(hh+1)*d], p1, kr, 1)
	}
	x := 0
	for ; x+4 <= len(valid); x += 4 {
		for y := range 4 {
			ix := int(blk[valid[x+y]])
			kr[y] = kvb.Row(ix)
		}
		hs := hsBuf[:0]
		rest := restBuf[:0]
		for hh := range h {
			all := true
			for y := range 4 {
				p := pbH[hh*blkN+valid[x+y]]
				p4s[4*hh+y] = p
				all = all && p != 0
			}
			if all && len(hs) < len(hsBuf) {
				hs = append(hs, int32(hh))
			} else {
				rest = append(rest, hh)
			}
		}
		ks.axpyHeads(pvH, d, p4s, hs, kr)
		for _, hh := range rest {
			for y := range 4 {
				one(hh, valid[x+y])
			}
		}
	}
	for hh := range h {
		for _, j := range valid[x:] {
			one(hh, j)
		}
	}
	for hh := range h {
		ah, pv := acc[hh*d:(hh+1)*d], pvH[hh*d:(hh+1)*d]
		alpha := alphaH[hh]
		d8 := 0
		if ks.scaleAdd != nil {
			d8 = d &^ 7
			ks.scaleAdd(ah[:d8], pv, alpha)
		}
		for di := d8; di < d; di++ {
			ah[di] = float32(ah[di]*alpha) + pv[di]
		}
	}
}

// IndexScore is kernels.IndexScore, bit for bit: the float64 dots of a key
// with every head's query run with the heads in vector lanes (each the
// reference's sequential sum); the per-head bf16 steps are the reference's.
func IndexScore(out []float32, q []float32, b, s, h, di int, k []float32, nc int, w []float32) {
	ks := current()
	if ks.qkF64 == nil || h < 4 {
		kernels.IndexScore(out, q, b, s, h, di, k, nc, w)
		return
	}
	if len(out) < b*s*nc || len(q) < b*s*h*di || len(k) < b*nc*di || len(w) < b*s*h {
		panic("kernels.IndexScore: buffer too small")
	}
	h4 := h &^ 3
	const rowsPer = 4 // query rows per task
	terms := ks.indexTerms != nil && h%8 == 0
	parallel(ceilDiv(b*s, rowsPer), func(c int) {
		// scratch from pools (every element is written before it is read):
		// a decode row makes 3 of these calls a step
		sc := getF64(di*h4 + 16)
		defer putF64(sc)
		qT, dots := (*sc)[:di*h4], (*sc)[di*h4:]
		eb := getBuf(nc * h)
		defer putBuf(eb)
		ea := *eb // a row's head dots, then its terms, [key][head]
		for row := c * rowsPer; row < min(b*s, (c+1)*rowsPer); row++ {
			bi := row / s
			qs := q[row*h*di : (row+1)*h*di]
			for hh := range h4 {
				for i, v := range qs[hh*di : (hh+1)*di] {
					qT[i*h4+hh] = float64(v)
				}
			}
			wr := w[row*h : (row+1)*h]
			for j := range nc {
				kv := k[(bi*nc+j)*di : (bi*nc+j+1)*di]
				e := ea[j*h : (j+1)*h]
				hh := 0
				for ; hh+16 <= h4; hh += 16 {
					ks.qkF64(qT[hh:], h4, kv, di, dots, 4)
					for x := range 16 {
						e[hh+x] = float32(dots[x])
					}
				}
				if hh+8 <= h4 { // (two chains: the tiny model's 8 heads)
					ks.qkF64(qT[hh:], h4, kv, di, dots, 2)
					for x := range 8 {
						e[hh+x] = float32(dots[x])
					}
					hh += 8
				}
				for ; hh < h4; hh += 4 {
					ks.qkF64(qT[hh:], h4, kv, di, dots, 1)
					for x := range 4 {
						e[hh+x] = float32(dots[x])
					}
				}
				for ; hh < h; hh++ {
					var dot float64
					for d, x := range qs[hh*di : (hh+1)*di] {
						dot += float64(float64(x) * float64(kv[d]))
					}
					e[hh] = float32(dot)
				}
			}
			if terms {
				// the per-head bf16 steps in vectors, then each key's sum
				// in head order
				ks.indexTerms(ea, ea, wr, h)
				for j := range nc {
					var sum float32
					for _, tv := range ea[j*h : (j+1)*h] {
						sum += tv
					}
					out[row*nc+j] = numfmt.BF16Round(sum)
				}
				continue
			}
			for j := range nc {
				var sum float32
				for hi, ev := range ea[j*h : (j+1)*h] {
					ev = numfmt.BF16Round(ev)
					if ev <= 0 {
						ev = 0
					}
					sum += numfmt.BF16Round(ev * wr[hi])
				}
				out[row*nc+j] = numfmt.BF16Round(sum)
			}
		}
	})
}

// f64Pool recycles IndexScore's float64 scratch.
var f64Pool sync.Pool

// getF64 is a float64 buffer of n elements (not zeroed), from f64Pool.
func getF64(n int) *[]float64 {
	if p, ok := f64Pool.Get().(*[]float64); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	b := make([]float64, n)
	return &b
}

func putF64(p *[]float64) { f64Pool.Put(p) }
