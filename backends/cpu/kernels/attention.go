package kernels

import (
	"math"

	"github.com/ds4go/ds4/internal/numfmt"
)

// SparseAttnBlock is the number of index entries the sparse attention kernel
// processes per online-softmax step (kernel.py `block`, spec §4.9). The
// per-block bf16 rounding of the probabilities makes it part of the numerics.
const SparseAttnBlock = 64

// attentionInitMax is the running-max seed of the online softmax. It is finite
// so that a row whose indices are all -1 yields exactly 0 instead of NaN.
const attentionInitMax = float32(-1e30)

// SparseAttn is sparse_attn(q, kv, sink, idx, scale) of spec §4.9: single
// shared-KV-head attention over gathered rows, with an attention sink.
//
// Shapes (row-major): q [b, m, h, d], kv [b, n, d] (one row is both key and
// value for every head), sink [h] (fp32), idx [b, m, t] (int32, -1 = empty
// slot, otherwise a row of kv in [0, n)), out [b, m, h, d]. q and kv hold bf16
// values.
//
// Numerics, per (b, m, h), walking idx in blocks of SparseAttnBlock = 64
// entries (positions t0 .. t0+63 of the index row, invalid entries included):
//
//	s_j   = fp32(q · kv[idx_j]) * scale          valid j (fp32 logits)
//	s_j   = -inf                                  idx_j == -1
//	μ'    = max(μ, max_j s_j)                     μ starts at -1e30
//	α     = exp(μ − μ')
//	p_j   = exp(s_j − μ')                         fp32
//	l     = l·α + Σ_j p_j                         fp32 denominator (unrounded p)
//	acc_d = acc_d·α + Σ_j bf16(p_j)·kv[idx_j][d]  p rounded to bf16 before P·V
//	μ     = μ'
//
// then l += exp(sink_h − μ) (the sink is not multiplied by scale) and
// out = bf16(acc / l). Dot products and the per-block sums are accumulated in
// float64 and rounded once to float32 (the exactly rounded value of the fp32
// einsum; the reference GEMM differs by a few fp32 ulp). exp is math.Exp
// rounded to float32. A row with no valid index gives l = exp(sink+1e30) =
// +inf and an output of exactly 0.
func SparseAttn(out, q []float32, b, m, h, d int, kv []float32, n int, sink []float32, idx []int32, t int, scale float32) {
	SparseAttnSplit(out, q, b, m, h, d, kv, n, nil, 0, sink, idx, t, scale)
}

// KVRows are the key/value rows of one batch row of a sparse attention:
// A's NA rows, then B's (of D values each).
type KVRows struct {
	A, B  []float32
	NA, D int
}

// Row is row ix of A followed by B.
func (k KVRows) Row(ix int) []float32 {
	if ix < k.NA {
		return k.A[ix*k.D : (ix+1)*k.D]
	}
	ix -= k.NA
	return k.B[ix*k.D : (ix+1)*k.D]
}

// SparseAttnSplit is SparseAttn over the rows of kv [b, n, d] followed by
// those of kv2 [b, n2, d] (index n+j is kv2's row j), as if they were one
// [b, n+n2, d] tensor: the same operations, without the concatenation.
func SparseAttnSplit(out, q []float32, b, m, h, d int, kv []float32, n int, kv2 []float32, n2 int, sink []float32, idx []int32, t int, scale float32) {
	if len(q) < b*m*h*d || len(out) < b*m*h*d || len(kv) < b*n*d || len(kv2) < b*n2*d || len(sink) < h || len(idx) < b*m*t {
		panic("kernels.SparseAttn: buffer too small")
	}
	// One work unit per (b, m, h): units are independent and each runs the
	// single-threaded sequence of operations.
	parallelRange(b*m*h, 1, b*m*h*t*d*2, func(u0, u1 int) {
		s := make([]float32, SparseAttnBlock)
		pb := make([]float32, SparseAttnBlock)
		acc := make([]float32, d)
		pv := make([]float64, d)
		valid := make([]int, SparseAttnBlock)
		for u := u0; u < u1; u++ {
			bi, mi, hi := u/(m*h), (u/h)%m, u%h
			kvb := KVRows{A: kv[bi*n*d : (bi+1)*n*d], B: kv2[bi*n2*d : (bi+1)*n2*d], NA: n, D: d}
			row := idx[(bi*m+mi)*t : (bi*m+mi+1)*t]
			qv := q[((bi*m+mi)*h+hi)*d : ((bi*m+mi)*h+hi+1)*d]
			mu := attentionInitMax
			var l float32
			clear(acc)
			for t0 := 0; t0 < t; t0 += SparseAttnBlock {
				blk := row[t0:min(t0+SparseAttnBlock, t)]
				bmax := float32(math.Inf(-1))
				nv := 0 // valid entries, in order
				for j, ix := range blk {
					if ix < 0 {
						s[j] = float32(math.Inf(-1))
						continue
					}
					if int(ix) >= n+n2 {
						panic("kernels.SparseAttn: index out of range")
					}
					valid[nv] = j
					nv++
				}
				if nv == 0 {
					// No valid entry: the block would leave μ, l and acc as
					// they are (α = 1, every p = 0) but for turning an acc of
					// −0 into +0; skipping it makes a row's result independent
					// of the −1 padding after (or before) its valid entries, so
					// that a prompt run in chunks (shorter top-k lists) gives
					// the bits of one prefill call.
					continue
				}
				// The logits of four rows at a time (independent sums).
				v := 0
				for ; v+4 <= nv; v += 4 {
					j0, j1, j2, j3 := valid[v], valid[v+1], valid[v+2], valid[v+3]
					r0, r1, r2, r3 := int(blk[j0]), int(blk[j1]), int(blk[j2]), int(blk[j3])
					d0, d1, d2, d3 := attentionDot4(qv, kvb.Row(r0), kvb.Row(r1), kvb.Row(r2), kvb.Row(r3))
					s[j0], s[j1], s[j2], s[j3] = d0*scale, d1*scale, d2*scale, d3*scale
				}
				for ; v < nv; v++ {
					j := valid[v]
					s[j] = attentionDot(qv, kvb.Row(int(blk[j]))) * scale
				}
				for _, j := range valid[:nv] {
					bmax = max(bmax, s[j])
				}
				newMu := max(mu, bmax)
				alpha := elemExp(mu - newMu)
				var psum float64
				clear(pv)
				nu := 0 // entries that add to P·V, in order
				for j, ix := range blk {
					p := elemExp(s[j] - newMu)
					psum += float64(p)
					pb[j] = numfmt.BF16Round(p)
					if ix < 0 || pb[j] == 0 {
						continue
					}
					valid[nu] = j
					nu++
				}
				// Two rows per sweep of pv: each pv[di] still receives the
				// terms in index order.
				u := 0
				for ; u+2 <= nu; u += 2 {
					ja, jb := valid[u], valid[u+1]
					pa, pbj := float64(pb[ja]), float64(pb[jb])
					ka := kvb.Row(int(blk[ja]))
					kb := kvb.Row(int(blk[jb]))
					pv := pv[:len(ka)]
					kb = kb[:len(ka)]
					for di, kvv := range ka {
						x := pv[di] + float64(pa*float64(kvv))
						pv[di] = x + float64(pbj*float64(kb[di]))
					}
				}
				for ; u < nu; u++ {
					j := valid[u]
					pj := float64(pb[j])
					kr := kvb.Row(int(blk[j]))
					pv := pv[:len(kr)]
					for di, kvv := range kr {
						pv[di] += float64(pj * float64(kvv))
					}
				}
				l = float32(l*alpha) + float32(psum)
				for di := range acc {
					acc[di] = float32(acc[di]*alpha) + float32(pv[di])
				}
				mu = newMu
			}
			l += elemExp(sink[hi] - mu)
			o := out[((bi*m+mi)*h+hi)*d : ((bi*m+mi)*h+hi+1)*d]
			for di := range o {
				o[di] = numfmt.BF16Round(acc[di] / l)
			}
		}
	})
}

// attentionDot is the fp32 dot product of two equal-length vectors,
// accumulated in float64 and rounded once.
func attentionDot(a, b []float32) float32 {
	var s float64
	for i, v := range a {
		s += float64(float64(v) * float64(b[i]))
	}
	return float32(s)
}

// attentionDot4 is attentionDot of q with four rows at once (four
// independent sums, each the same sequence as attentionDot's).
func attentionDot4(q, k0, k1, k2, k3 []float32) (float32, float32, float32, float32) {
	n := len(q)
	k0, k1, k2, k3 = k0[:n], k1[:n], k2[:n], k3[:n]
	var s0, s1, s2, s3 float64
	for i, v := range q {
		x := float64(v)
		s0 += float64(x * float64(k0[i]))
		s1 += float64(x * float64(k1[i]))
		s2 += float64(x * float64(k2[i]))
		s3 += float64(x * float64(k3[i]))
	}
	return float32(s0), float32(s1), float32(s2), float32(s3)
}
