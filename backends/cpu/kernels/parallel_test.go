package kernels

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/ds4go/ds4/internal/numfmt"
)

// The threaded kernels must give bit-identical results with any number of
// threads: run them with GOMAXPROCS 1 and 4 and against serial copies of the
// original loops.

func randBF16(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = numfmt.BF16Round(float32(r.NormFloat64()))
	}
	return v
}

func sameBits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: element %d: %v vs %v", what, i, a[i], b[i])
		}
	}
}

func withProcs(p int, fn func()) {
	prev := runtime.GOMAXPROCS(p)
	defer runtime.GOMAXPROCS(prev)
	fn()
}

func groupedLoRASerial(out, o []float32, m, groups, dg int, woA []float32, rank int) {
	for i := range m {
		for g := range groups {
			og := o[(i*groups+g)*dg : (i*groups+g+1)*dg]
			for r := range rank {
				row := (g*rank + r) * dg
				out[i*groups*rank+g*rank+r] = numfmt.BF16Round(gemmDot(og, woA[row:row+dg]))
			}
		}
	}
}

func hcMixesSerial(out []float32, h []float32, tokens, hc, dim int, fn []float32, eps float32) {
	mix, n := hcMix(hc), hc*dim
	ms := make([]float32, 1)
	for t := range tokens {
		x := h[t*n : (t+1)*n]
		MeanSquare(ms, x, 1, n)
		rho := elemRsqrt(ms[0] + eps)
		for i := range mix {
			out[t*mix+i] = gemmDot(x, fn[i*n:(i+1)*n]) * rho
		}
	}
}

func TestThreadedKernelsBitIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, m := range []int{1, 2, 3, 17} {
		const groups, dg, rank = 3, 96, 37
		o, w := randBF16(r, m*groups*dg), randBF16(r, groups*rank*dg)
		want := make([]float32, m*groups*rank)
		groupedLoRASerial(want, o, m, groups, dg, w, rank)
		for _, p := range []int{1, 4} {
			got := make([]float32, len(want))
			withProcs(p, func() { GroupedLoRA(got, o, m, groups, dg, w, rank) })
			sameBits(t, "GroupedLoRA", want, got)
		}

		const hc, dim = 4, 160
		h, fn := randBF16(r, m*hc*dim), randBF16(r, hcMix(hc)*hc*dim)
		wantM := make([]float32, m*hcMix(hc))
		hcMixesSerial(wantM, h, m, hc, dim, fn, 1e-20)
		for _, p := range []int{1, 4} {
			got := make([]float32, len(wantM))
			withProcs(p, func() { HCMixes(got, h, m, hc, dim, fn, 1e-20) })
			sameBits(t, "HCMixes", wantM, got)
		}
	}
	// Kernels whose loops were only split: 1 thread against 4.
	const b, m, h, d, n, tt = 2, 9, 5, 64, 40, 70
	q, kv, sink := randBF16(r, b*m*h*d), randBF16(r, b*n*d), randBF16(r, h)
	idx := make([]int32, b*m*tt)
	for i := range idx {
		idx[i] = int32(r.IntN(n+3)) - 3
		if idx[i] < 0 {
			idx[i] = -1
		}
	}
	big := func(fn func(out []float32), size int) [2][]float32 {
		var res [2][]float32
		for i, p := range []int{1, 4} {
			res[i] = make([]float32, size)
			withProcs(p, func() { fn(res[i]) })
		}
		return res
	}
	v := big(func(out []float32) { SparseAttn(out, q, b, m, h, d, kv, n, sink, idx, tt, 0.125) }, b*m*h*d)
	sameBits(t, "SparseAttn", v[0], v[1])
	ref := make([]float32, b*m*h*d)
	sparseAttnSerial(ref, q, b, m, h, d, kv, n, sink, idx, tt, 0.125)
	sameBits(t, "SparseAttn vs serial", ref, v[0])
	const di = 32
	iq, ik, iw := randBF16(r, b*m*h*di), randBF16(r, b*n*di), randBF16(r, b*m*h)
	v = big(func(out []float32) { IndexScore(out, iq, b, m, h, di, ik, n, iw) }, b*m*n)
	sameBits(t, "IndexScore", v[0], v[1])
	x, nw := randBF16(r, 300*256), randBF16(r, 256)
	v = big(func(out []float32) { RMSNorm(out, x, 300, 256, nw, 1e-20) }, 300*256)
	sameBits(t, "RMSNorm", v[0], v[1])
	pre, hh := randBF16(r, 300*4), randBF16(r, 300*4*64)
	v = big(func(out []float32) { HCPre(out, hh, pre, 300, 4, 64) }, 300*64)
	sameBits(t, "HCPre", v[0], v[1])
	y, post, comb := randBF16(r, 300*64), randBF16(r, 300*4), randBF16(r, 300*16)
	v = big(func(out []float32) { HCPost(out, y, hh, post, comb, 300, 4, 64) }, 300*4*64)
	sameBits(t, "HCPost", v[0], v[1])
	v = big(func(out []float32) { HCPost(out, y[:64], hh[:4*64], post[:4], comb[:16], 1, 4, 64) }, 4*64)
	sameBits(t, "HCPost one token", v[0], v[1])
	g, u, rw := randBF16(r, 6*1536), randBF16(r, 6*1536), randBF16(r, 6)
	for i := range g {
		g[i] *= 8
		u[i] *= 8
	}
	v = big(func(out []float32) { SwiGLUClamp(out, g, u, 6, 1536, 10, rw) }, 6*1536)
	sameBits(t, "SwiGLUClamp", v[0], v[1])
	v = big(func(out []float32) { SwiGLUClamp(out, g, u, 6, 1536, 0, nil) }, 6*1536)
	sameBits(t, "SwiGLUClamp no limit", v[0], v[1])
	for _, hc := range []int{4, 3} { // mix 24 (groups of 4) and 15 (a tail)
		mh, mfn := randBF16(r, hc*1024), randBF16(r, hcMix(hc)*hc*1024)
		want := make([]float32, hcMix(hc))
		hcMixesSerial(want, mh, 1, hc, 1024, mfn, 1e-20)
		v = big(func(out []float32) { HCMixes(out, mh, 1, hc, 1024, mfn, 1e-20) }, hcMix(hc))
		sameBits(t, "HCMixes one token", want, v[0])
		sameBits(t, "HCMixes one token", want, v[1])
	}
}

// sparseAttnSerial is the single-threaded SparseAttn before the threading.
func sparseAttnSerial(out, q []float32, b, m, h, d int, kv []float32, n int, sink []float32, idx []int32, t int, scale float32) {
	if len(q) < b*m*h*d || len(out) < b*m*h*d || len(kv) < b*n*d || len(sink) < h || len(idx) < b*m*t {
		panic("kernels.SparseAttn: buffer too small")
	}
	s := make([]float32, SparseAttnBlock)
	pb := make([]float32, SparseAttnBlock)
	acc := make([]float32, d)
	pv := make([]float64, d)
	for bi := 0; bi < b; bi++ {
		kvb := kv[bi*n*d : (bi+1)*n*d]
		for mi := 0; mi < m; mi++ {
			row := idx[(bi*m+mi)*t : (bi*m+mi+1)*t]
			for hi := 0; hi < h; hi++ {
				qv := q[((bi*m+mi)*h+hi)*d : ((bi*m+mi)*h+hi+1)*d]
				mu := attentionInitMax
				var l float32
				clear(acc)
				for t0 := 0; t0 < t; t0 += SparseAttnBlock {
					blk := row[t0:min(t0+SparseAttnBlock, t)]
					bmax := float32(math.Inf(-1))
					for j, ix := range blk {
						if ix < 0 {
							s[j] = float32(math.Inf(-1))
							continue
						}
						if int(ix) >= n {
							panic("kernels.SparseAttn: index out of range")
						}
						s[j] = attentionDot(qv, kvb[int(ix)*d:int(ix+1)*d]) * scale
						bmax = max(bmax, s[j])
					}
					newMu := max(mu, bmax)
					alpha := elemExp(mu - newMu)
					var psum float64
					clear(pv)
					for j, ix := range blk {
						p := elemExp(s[j] - newMu)
						psum += float64(p)
						pb[j] = numfmt.BF16Round(p)
						if ix < 0 || pb[j] == 0 {
							continue
						}
						pj := float64(pb[j])
						kr := kvb[int(ix)*d : int(ix+1)*d]
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
		}
	}
}
