package kernels

import (
	"fmt"

	"github.com/ds4go/ds4/internal/numfmt"
)

// Hyper-connections (spec §4.3). The residual stream h is [tokens, hc, dim]
// (bf16 values); the mixes of one token are laid out
// [pre 0..hc-1 | post hc..2hc-1 | comb 2hc..], comb row-major
// (comb[i][j] = m[2hc + hc·i + j]), so mix = (2+hc)·hc.

// hcMix returns the number of mixes per token, (2+hc)·hc.
func hcMix(hc int) int { return (2 + hc) * hc }

// HCMixes computes the un-split hyper-connection mixes of Block.hc_mixes:
// with x the token's stream flattened to fp32 [hc·dim] (index c·dim + d),
//
//	ρ        = rsqrt(mean(x²) + eps)            (as MeanSquare, then elemRsqrt; one scalar per token)
//	out[t,i] = fp32( Σ_c x_c · fn[i,c] ) · ρ    (fp32 dot in ascending c, then one fp32 product)
//
// h is [tokens, hc, dim], fn is hc_fn [mix, hc·dim] (fp32), out is
// [tokens, mix] with mix = (2+hc)·hc, and eps is norm_eps. The matmul uses the
// un-normalised x. torch's F.linear sums in BLAS order, so out agrees with the
// reference to a few fp32 ulps.
func HCMixes(out []float32, h []float32, tokens, hc, dim int, fn []float32, eps float32) {
	mix, n := hcMix(hc), hc*dim
	gemmCheck("HCMixes", len(out), tokens*mix, len(h), tokens*n, len(fn), mix*n)
	if tokens < 4 {
		// few tokens (decode): the norm factors first, then the mixes in
		// groups of 4 (the same gemmDot4 calls) spread over the threads
		rho := make([]float32, tokens)
		ms := make([]float32, 1)
		for t := range tokens {
			MeanSquare(ms, h[t*n:(t+1)*n], 1, n)
			rho[t] = elemRsqrt(ms[0] + eps)
		}
		groups := (mix + 3) / 4
		parallelRange(tokens*groups, 1, tokens*mix*n, func(u0, u1 int) {
			for u := u0; u < u1; u++ {
				t, i := u/groups, (u%groups)*4
				x := h[t*n : (t+1)*n]
				if i+4 <= mix {
					s0, s1, s2, s3 := gemmDot4(x, fn[i*n:(i+1)*n], fn[(i+1)*n:(i+2)*n], fn[(i+2)*n:(i+3)*n], fn[(i+3)*n:(i+4)*n])
					out[t*mix+i] = s0 * rho[t]
					out[t*mix+i+1] = s1 * rho[t]
					out[t*mix+i+2] = s2 * rho[t]
					out[t*mix+i+3] = s3 * rho[t]
					continue
				}
				for ; i < mix; i++ {
					out[t*mix+i] = gemmDot(x, fn[i*n:(i+1)*n]) * rho[t]
				}
			}
		})
		return
	}
	parallelRange(tokens, 1, tokens*mix*n, func(t0, t1 int) {
		ms := make([]float32, 1)
		for t := t0; t < t1; t++ {
			x := h[t*n : (t+1)*n]
			MeanSquare(ms, x, 1, n)
			rho := elemRsqrt(ms[0] + eps)
			i := 0
			for ; i+4 <= mix; i += 4 {
				s0, s1, s2, s3 := gemmDot4(x, fn[i*n:(i+1)*n], fn[(i+1)*n:(i+2)*n], fn[(i+2)*n:(i+3)*n], fn[(i+3)*n:(i+4)*n])
				out[t*mix+i] = s0 * rho
				out[t*mix+i+1] = s1 * rho
				out[t*mix+i+2] = s2 * rho
				out[t*mix+i+3] = s3 * rho
			}
			for ; i < mix; i++ {
				out[t*mix+i] = gemmDot(x, fn[i*n:(i+1)*n]) * rho
			}
		}
	})
}

// HCSplitSinkhorn splits mixes [tokens, (2+hc)·hc] into pre [tokens, hc],
// post [tokens, hc] and comb [tokens, hc, hc] exactly as the reference kernel
// hc_split_sinkhorn (kernel 406-474, tt-metal's torch port), all fp32, every
// operation rounded:
//
//	pre_i   = σ(fp32(m_i·scale[0]) + base_i) + eps
//	post_i  = 2·σ(fp32(m_{hc+i}·scale[1]) + base_{hc+i})
//	C_ij    = fp32(m_{2hc+hc·i+j}·scale[2]) + base_{2hc+hc·i+j}
//	C_ij    = exp(C_ij − max_j C_ij) / (Σ_j exp(…)) + eps        (row softmax, then + eps)
//	C_ij    = C_ij / (Σ_i C_ij + eps)                            (column step)
//	iters−1 times: C_ij /= (Σ_j C_ij + eps) (row), then C_ij /= (Σ_i C_ij + eps) (column)
//
// σ(z) = 1/(1+exp(−z)). Sums run in ascending index order. The sequence ends
// on a column step; comb[t][i][j] is applied as out_j = Σ_i C_ij·res_i
// (HCPost). eps is hc_eps (1e-6), iters is hc_sinkhorn_iters (20).
func HCSplitSinkhorn(pre, post, comb, mixes []float32, tokens, hc int, scale, base []float32, iters int, eps float32) {
	mix := hcMix(hc)
	gemmCheck("HCSplitSinkhorn", len(pre), tokens*hc, len(post), tokens*hc, len(comb), tokens*hc*hc,
		len(mixes), tokens*mix, len(scale), 3, len(base), mix)
	if iters < 1 {
		panic(fmt.Sprintf("kernels.HCSplitSinkhorn: iters = %d, want >= 1", iters))
	}
	for t := range tokens {
		m := mixes[t*mix : (t+1)*mix]
		for i := range hc {
			pre[t*hc+i] = elemSigmoid(float32(m[i]*scale[0])+base[i]) + eps
			post[t*hc+i] = 2 * elemSigmoid(float32(m[hc+i]*scale[1])+base[hc+i])
		}
		c := comb[t*hc*hc : (t+1)*hc*hc]
		for k := range c {
			c[k] = float32(m[2*hc+k]*scale[2]) + base[2*hc+k]
		}
		hcSoftmaxRows(c, hc, eps)
		hcNormCols(c, hc, eps)
		for range iters - 1 {
			hcNormRows(c, hc, eps)
			hcNormCols(c, hc, eps)
		}
	}
}

// hcSoftmaxRows sets each row of the hc×hc matrix c to
// exp(c − rowmax)/rowsum + eps.
func hcSoftmaxRows(c []float32, hc int, eps float32) {
	for i := range hc {
		row := c[i*hc : (i+1)*hc]
		mx := row[0]
		for _, v := range row[1:] {
			mx = max(mx, v)
		}
		var s float32
		for j, v := range row {
			row[j] = elemExp(v - mx)
			s += row[j]
		}
		for j := range row {
			row[j] = row[j]/s + eps
		}
	}
}

// hcNormRows divides each row of c by (its sum + eps).
func hcNormRows(c []float32, hc int, eps float32) {
	for i := range hc {
		row := c[i*hc : (i+1)*hc]
		var s float32
		for _, v := range row {
			s += v
		}
		d := s + eps
		for j := range row {
			row[j] /= d
		}
	}
}

// hcNormCols divides each column of c by (its sum + eps).
func hcNormCols(c []float32, hc int, eps float32) {
	for j := range hc {
		var s float32
		for i := range hc {
			s += c[i*hc+j]
		}
		d := s + eps
		for i := range hc {
			c[i*hc+j] /= d
		}
	}
}

// HCPre collapses the stream h [tokens, hc, dim] with the pre mix
// pre [tokens, hc] (Block.hc_pre):
//
//	out[t,d] = bf16( Σ_i fp32(pre[t,i] · h[t,i,d]) )    (fp32, i ascending)
//
// out is [tokens, dim].
func HCPre(out, h, pre []float32, tokens, hc, dim int) {
	gemmCheck("HCPre", len(out), tokens*dim, len(h), tokens*hc*dim, len(pre), tokens*hc)
	parallelRange(tokens, 1, tokens*hc*dim, func(t0, t1 int) {
		for t := t0; t < t1; t++ {
			for d := range dim {
				var s float32
				for i := range hc {
					s += float32(pre[t*hc+i] * h[(t*hc+i)*dim+d])
				}
				out[t*dim+d] = numfmt.BF16Round(s)
			}
		}
	})
}

// HCPost expands a sublayer output y [tokens, dim] back into the stream and
// mixes in the residual res [tokens, hc, dim] (Block.hc_post):
//
//	out[t,j,d] = bf16( fp32(post[t,j]·y[t,d]) + Σ_i fp32(comb[t,i,j]·res[t,i,d]) )
//
// with the residual sum in fp32, i ascending, computed before it is added to
// the post term. Note the sum runs over the first comb index: the destination
// copy is the column j. out is [tokens, hc, dim] and must not alias res.
func HCPost(out, y, res, post, comb []float32, tokens, hc, dim int) {
	gemmCheck("HCPost", len(out), tokens*hc*dim, len(y), tokens*dim, len(res), tokens*hc*dim,
		len(post), tokens*hc, len(comb), tokens*hc*hc)
	parallelRange(tokens*hc, 1, tokens*hc*hc*dim, func(u0, u1 int) {
		for u := u0; u < u1; u++ {
			t := u / hc
			for j := u % hc; j < u%hc+1; j++ {
				p := post[t*hc+j]
				for d := range dim {
					var s float32
					for i := range hc {
						s += float32(comb[(t*hc+i)*hc+j] * res[(t*hc+i)*dim+d])
					}
					out[(t*hc+j)*dim+d] = numfmt.BF16Round(float32(p*y[t*dim+d]) + s)
				}
			}
		}
	})
}
