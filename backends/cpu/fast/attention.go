package fast

import (
	"math"
	"runtime"

	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/internal/numfmt"
)

// SparseAttn is kernels.SparseAttn, bit for bit, restructured for speed:
// a work unit is one query position (b, m) with all its heads, so that the
// key rows of an index block are dotted with every head's query at once
// (heads in vector lanes, each logit the reference's sequential float64
// sum), and P·V accumulates four head-dim elements per vector (each pv[d]
// receives its terms in the reference order). Every per-head value goes
// through the reference's operations in the reference's order.
func SparseAttn(out, q []float32, b, m, h, d int, kv []float32, n int, sink []float32, idx []int32, t int, scale float32) {
	ks := current()
	if ks.qkF64 == nil || d%4 != 0 || h < 4 {
		kernels.SparseAttn(out, q, b, m, h, d, kv, n, sink, idx, t, scale)
		return
	}
	if len(q) < b*m*h*d || len(out) < b*m*h*d || len(kv) < b*n*d || len(sink) < h || len(idx) < b*m*t {
		panic("kernels.SparseAttn: buffer too small")
	}
	if p := runtime.GOMAXPROCS(0); b*m == 1 && p > 1 && h >= 8 {
		// one query position (decode): split the heads (independent, each
		// with the same operations) into groups of a multiple of 4; q, out
		// and sink of a head range are contiguous
		hg := ceilDiv(ceilDiv(h, 4), p) * 4
		parallel(ceilDiv(h, hg), func(g int) {
			h0, h1 := g*hg, min(h, (g+1)*hg)
			sparseAttn1(ks, out[h0*d:h1*d], q[h0*d:h1*d], h1-h0, d, kv, n, sink[h0:h1], idx, t, scale)
		})
		return
	}
	sparseAttnUnits(ks, out, q, b, m, h, d, kv, n, sink, idx, t, scale)
}

// sparseAttn1 is SparseAttn of one query position on the caller.
func sparseAttn1(ks *kernelSet, out, q []float32, h, d int, kv []float32, n int, sink []float32, idx []int32, t int, scale float32) {
	if h < 4 {
		kernels.SparseAttn(out, q, 1, 1, h, d, kv, n, sink, idx, t, scale)
		return
	}
	sparseAttnUnits(ks, out, q, 1, 1, h, d, kv, n, sink, idx, t, scale)
}

// sparseAttnUnits runs SparseAttn's work units (one query position each).
func sparseAttnUnits(ks *kernelSet, out, q []float32, b, m, h, d int, kv []float32, n int, sink []float32, idx []int32, t int, scale float32) {
	const blkN = kernels.SparseAttnBlock
	negInf := float32(math.Inf(-1))
	h4 := h &^ 3
	parallel(b*m, func(u int) {
		bi, mi := u/m, u%m
		kvb := kv[bi*n*d : (bi+1)*n*d]
		row := idx[(bi*m+mi)*t : (bi*m+mi+1)*t]
		qs := q[(bi*m+mi)*h*d : (bi*m+mi+1)*h*d]
		qT := make([]float64, d*h4)
		for hh := range h4 {
			for i, v := range qs[hh*d : (hh+1)*d] {
				qT[i*h4+hh] = float64(v)
			}
		}
		s := make([]float32, h*blkN) // s[hh*blkN+j]
		pb := make([]float32, blkN)
		exps := make([]float32, blkN)
		acc := make([]float32, h*d)
		pv := make([]float64, d)
		dots := make([]float64, 32)
		valid := make([]int, blkN)
		use := make([]int, blkN)
		mu := make([]float32, h)
		l := make([]float32, h)
		for hh := range mu {
			mu[hh] = float32(-1e30) // attentionInitMax
		}
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
				if int(ix) >= n {
					panic("kernels.SparseAttn: index out of range")
				}
				valid[nv] = j
				nv++
			}
			vi := 0
			if ks.qkF64Keys != nil && h4 == h {
				// the head vectors of several keys at once (independent sums)
				vi = qkKeys(ks, qT, h4, kvb, d, blk, valid[:nv], s, blkN, scale, dots)
			}
			for _, j := range valid[vi:nv] {
				krow := kvb[int(blk[j])*d : int(blk[j]+1)*d]
				hh := 0
				for ; hh+16 <= h4; hh += 16 {
					ks.qkF64(qT[hh:], h4, krow, d, dots, 4)
					for x := range 16 {
						s[(hh+x)*blkN+j] = float32(dots[x]) * scale
					}
				}
				for ; hh < h4; hh += 4 {
					ks.qkF64(qT[hh:], h4, krow, d, dots, 1)
					for x := range 4 {
						s[(hh+x)*blkN+j] = float32(dots[x]) * scale
					}
				}
				for ; hh < h; hh++ {
					var sum float64
					for i, v := range qs[hh*d : (hh+1)*d] {
						sum += float64(float64(v) * float64(krow[i]))
					}
					s[hh*blkN+j] = float32(sum) * scale
				}
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
				// the block's exps first, four at a time when the kernel is there
				ex := exps[:len(blk)]
				for j := range blk {
					ex[j] = sh[j] - newMu
				}
				whole := 0
				if ks.expF32 != nil && ks.expF32(ex[:len(ex)&^3], ex[:len(ex)&^3]) {
					whole = len(ex) &^ 3
				} else {
					for j := range blk {
						ex[j] = sh[j] - newMu
					}
				}
				for j := whole; j < len(ex); j++ {
					ex[j] = float32(math.Exp(float64(ex[j])))
				}
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
				var p4 [4]float64
				for ; x+4 <= nu; x += 4 {
					var kr [4][]float32
					for y := range 4 {
						jy := use[x+y]
						p4[y] = float64(pb[jy])
						kr[y] = kvb[int(blk[jy])*d : int(blk[jy]+1)*d]
					}
					ks.axpy4F64(pv, &p4, kr[0], kr[1], kr[2], kr[3])
				}
				for ; x+2 <= nu; x += 2 {
					ja, jb := use[x], use[x+1]
					ka := kvb[int(blk[ja])*d : int(blk[ja]+1)*d]
					kb := kvb[int(blk[jb])*d : int(blk[jb]+1)*d]
					ks.axpy2F64(pv, float64(pb[ja]), float64(pb[jb]), ka, kb)
				}
				if x < nu {
					j := use[x]
					pj := float64(pb[j])
					for di, kvv := range kvb[int(blk[j])*d : int(blk[j]+1)*d] {
						pv[di] += float64(pj * float64(kvv))
					}
				}
				lh := float32(l[hh]*alpha) + float32(psum)
				l[hh] = lh
				ah := acc[hh*d : (hh+1)*d]
				for di := range ah {
					ah[di] = float32(ah[di]*alpha) + float32(pv[di])
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

// qkKeys sets s[hh*blkN+j] = float32(q_hh·k_j)·scale for the first keys of
// valid (positions j in blk) with the qkF64Keys kernel, for every head of
// the h4 (a multiple of 4) in qT; it returns how many keys it did (a
// multiple of the keys per call; the caller does the rest).
func qkKeys(ks *kernelSet, qT []float64, h4 int, kvb []float32, d int, blk []int32, valid []int, s []float32, blkN int, scale float32, dots []float64) int {
	var keys [4][]float32
	done := len(valid)
	for hh := 0; hh < h4; {
		g := 1
		switch {
		case h4-hh >= 16:
			g = 4
		case h4-hh >= 8:
			g = 2
		}
		nk := keysPerCall(g)
		whole := len(valid) / nk * nk
		done = min(done, whole)
		for v0 := 0; v0 < whole; v0 += nk {
			for x := range nk {
				ix := int(blk[valid[v0+x]])
				keys[x] = kvb[ix*d : (ix+1)*d]
			}
			ks.qkF64Keys(qT[hh:], h4, &keys, d, dots, g)
			for x := range nk {
				j := valid[v0+x]
				for y := range 4 * g {
					s[(hh+y)*blkN+j] = float32(dots[x*4*g+y]) * scale
				}
			}
		}
		hh += 4 * g
	}
	return done
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
	parallel(ceilDiv(b*s, rowsPer), func(c int) {
		qT := make([]float64, di*h4)
		dots := make([]float64, 16)
		e := make([]float32, h)
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
				hh := 0
				for ; hh+16 <= h4; hh += 16 {
					ks.qkF64(qT[hh:], h4, kv, di, dots, 4)
					for x := range 16 {
						e[hh+x] = float32(dots[x])
					}
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
				var sum float32
				for hi, ev := range e {
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
