package fast

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/internal/numfmt"
)

func rawBF16(v []float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		u := math.Float32bits(x) >> 16
		b[2*i], b[2*i+1] = byte(u), byte(u>>8)
	}
	return b
}

// TestMatmulW16 checks that the raw-bf16 matmuls are bit-identical to the
// f32 ones on the widened weights, at every level and on both paths.
func TestMatmulW16(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, l := range levels(t) {
		for _, sh := range [][3]int{{1, 64, 40}, {2, 100, 33}, {4, 37, 9}, {7, 300, 70}, {33, 256, 65}} {
			m, k, n := sh[0], sh[1], sh[2]
			a := randF32(r, m*k, false)
			w := randF32(r, n*k, true)
			raw := rawBF16(w)
			for _, round := range []bool{false, true} {
				want, got := make([]float32, m*n), make([]float32, m*n)
				withLevel(l, func() {
					if round {
						MatmulBF16(want, a, w, m, k, n)
						MatmulBF16W16(got, a, raw, m, k, n)
					} else {
						MatmulF32(want, a, w, m, k, n)
						MatmulF32W16(got, a, raw, m, k, n)
					}
				})
				for i := range want {
					if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
						t.Fatalf("%v %v round=%v: [%d] = %g, want %g", l, sh, round, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestGroupedLoRA checks bit-identity with kernels.GroupedLoRA, for f32
// and for fp8 weights dequantised as the binder did.
func TestGroupedLoRA(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, l := range levels(t) {
		for _, sh := range [][4]int{{1, 2, 64, 32}, {3, 4, 96, 40}, {5, 1, 33, 7}, {2, 8, 128, 64}, {2, 3, 64, 24}, {6, 2, 256, 16}, {1, 4, 256, 64}, {12, 2, 96, 32}} {
			m, groups, dg, rank := sh[0], sh[1], sh[2], sh[3]
			rows := groups * rank
			o := randActs(r, m, groups*dg)
			codes, scales := randFP8(r, rows, dg)
			if m%2 == 1 {
				// NaN codes, and every scale byte (products leaving the
				// normal range) where the sequential path runs anyway
				if rank%32 != 0 {
					for i := range scales {
						scales[i] = byte(r.IntN(255))
					}
				}
				codes[3], codes[len(codes)-1] = 0x7F, 0xFF
			}
			kbs := ceilDiv(dg, 32)
			w := make([]float32, rows*dg)
			for i := range rows {
				for d := range dg {
					w[i*dg+d] = numfmt.BF16Round(numfmt.E4M3ToF32(codes[i*dg+d]) * numfmt.E8M0ToF32(scales[(i/32)*kbs+d/32]))
				}
			}
			if l == AVX2 && m%2 == 0 && !loraExact(scales) {
				t.Errorf("%v: the direct fp8 path is not exercised", sh)
			}
			want := make([]float32, m*rows)
			kernels.GroupedLoRA(want, o, m, groups, dg, w, rank)
			for _, fp8 := range []bool{false, true} {
				got := make([]float32, m*rows)
				withLevel(l, func() {
					if fp8 {
						GroupedLoRA(got, o, m, groups, dg, nil, codes, scales, rank)
					} else {
						GroupedLoRA(got, o, m, groups, dg, w, nil, nil, rank)
					}
				})
				if fp8 && rank%32 == 0 && loraExact(scales) {
					// one fp8 matmul per group: fp32 rounding of another order
					mag := make([]float64, m*rows)
					for i := range m {
						for g := range groups {
							part := magnitudes(o[(i*groups+g)*dg:(i*groups+g+1)*dg], w[g*rank*dg:(g+1)*rank*dg], 1, dg, rank)
							copy(mag[i*rows+g*rank:], part)
						}
					}
					compareBF16(t, fmt.Sprintf("%v %v fp8 matmul", l, sh), got, want, mag)
					continue
				}
				for i := range want {
					if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) {
						t.Fatalf("%v %v fp8=%v: [%d] = %g, want %g", l, sh, fp8, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestSparseAttn checks SparseAttn against kernels.SparseAttn: bit for bit
// where it runs the reference (portable level, shapes the f32 kernels do
// not take), else within the f32 rounding of its two dot products (≤ 1
// bf16 ulp, ≤ 2 % of the elements off at all); and that a query position's
// result does not depend on the call (decode splits the heads over the
// cores, prefill runs all heads of a position together).
func TestSparseAttn(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	shapes := [][6]int{{1, 3, 16, 64, 40, 150}, {2, 2, 6, 32, 9, 70}, {1, 1, 20, 36, 300, 64}, {1, 2, 3, 16, 10, 20},
		{1, 1, 16, 64, 200, 150}, {1, 1, 10, 32, 50, 40}, {1, 2, 16, 512, 700, 640}, {1, 3, 12, 128, 90, 130}, {1, 2, 4, 64, 30, 40}}
	for _, l := range levels(t) {
		for _, sh := range shapes {
			b, m, h, d, n, tt := sh[0], sh[1], sh[2], sh[3], sh[4], sh[5]
			q := randF32(r, b*m*h*d, true)
			kv := randF32(r, b*n*d, true)
			for i := range q {
				q[i] *= 4
			}
			sink := randF32(r, h, false)
			idx := make([]int32, b*m*tt)
			for i := range idx {
				idx[i] = int32(r.IntN(n+n/4)) - int32(n/4) // some -1.. slots
				if idx[i] < 0 {
					idx[i] = -1
				}
			}
			want, got := make([]float32, b*m*h*d), make([]float32, b*m*h*d)
			kernels.SparseAttn(want, q, b, m, h, d, kv, n, sink, idx, tt, 0.125)
			var f32 bool
			withLevel(l, func() {
				SparseAttn(got, q, b, m, h, d, kv, n, sink, idx, tt, 0.125)
				f32 = sparseAttnF32(current(), h, d)
			})
			// off by more than 1 ulp only where the head's output is small:
			// within 2^-9 of the head row's largest magnitude
			off, over1 := 0, 0
			for i := range want {
				if math.Float32bits(want[i]) == math.Float32bits(got[i]) {
					continue
				}
				off++
				du := bf16Ord(got[i]) - bf16Ord(want[i])
				if du >= -1 && du <= 1 && f32 {
					continue
				}
				over1++
				var rowMax float64
				for _, v := range want[i/d*d : i/d*d+d] {
					rowMax = math.Max(rowMax, math.Abs(float64(v)))
				}
				if !f32 || math.Abs(float64(got[i]-want[i])) > rowMax/512 {
					t.Fatalf("%v %v (f32 %v): [%d] = %g, want %g (head max %g)", l, sh, f32, i, got[i], want[i], rowMax)
				}
			}
			if f32 && off > 0 {
				t.Logf("%v %v: %d of %d elements differ from the reference, %d by more than 1 ulp", l, sh, off, len(want), over1)
			}
			if off*50 > len(want) || over1*1000 > len(want) {
				t.Fatalf("%v %v: %d of %d elements differ from the reference, %d by more than 1 ulp", l, sh, off, len(want), over1)
			}
			// each query position alone (decode's head split) gives the same bits
			if b == 1 {
				for mi := range m {
					one := make([]float32, h*d)
					withLevel(l, func() {
						SparseAttn(one, q[mi*h*d:(mi+1)*h*d], 1, 1, h, d, kv, n, sink, idx[mi*tt:(mi+1)*tt], tt, 0.125)
					})
					for i, v := range one {
						if math.Float32bits(v) != math.Float32bits(got[mi*h*d+i]) {
							t.Fatalf("%v %v: position %d alone: [%d] = %g, in the call %g", l, sh, mi, i, v, got[mi*h*d+i])
						}
					}
				}
			}
		}
	}
}

// TestPackB checks the vector panel packing against the Go one, bit for bit.
func TestPackB(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	for _, l := range levels(t) {
		for _, k := range []int{32, 96, 256} {
			n := 48
			w8, s8 := randFP8(r, n, k)
			w4, s4 := randFP4(r, n, k)
			for i := range s4 {
				if i%7 == 0 {
					s4[i] = byte(r.IntN(256))
				}
			}
			raw := rawBF16(randF32(r, n*k, true))
			kb := ceilDiv(k, 32)
			for _, w := range []*weights{
				{kind: kindFP8, n: n, k: k, q: w8, s: s8, kb: kb},
				{kind: kindFP4, n: n, k: k, q: w4, s: s4, kb: kb},
				{kind: kindBF16, n: n, k: k, q: raw, kb: kb},
			} {
				for _, cols := range []int{16, 8, 5} {
					for _, j0 := range []int{0, 16, 32} {
						want, got := make([]float32, k*16), make([]float32, k*16)
						for i := range got {
							got[i], want[i] = -1, -1
						}
						packBGo(want, w, j0, cols, 16)
						withLevel(l, func() { packB(got, w, j0, cols, 16) })
						for i := range want {
							if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) {
								t.Fatalf("%v kind %d k=%d cols=%d j0=%d: [%d] = %g, want %g", l, w.kind, k, cols, j0, i, got[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestIndexScore checks bit-identity with kernels.IndexScore.
func TestIndexScore(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, l := range levels(t) {
		for _, sh := range [][5]int{{1, 5, 16, 128, 37}, {2, 3, 6, 32, 10}, {1, 2, 3, 16, 5}, {1, 9, 20, 64, 70}, {1, 3, 24, 32, 9}, {1, 2, 16, 32, 0}, {1, 4, 8, 32, 13}, {2, 2, 12, 32, 7}, {1, 1, 28, 16, 6}} {
			b, s, h, di, nc := sh[0], sh[1], sh[2], sh[3], sh[4]
			q := randF32(r, b*s*h*di, true)
			k := randF32(r, b*nc*di, true)
			w := randF32(r, b*s*h, true)
			want, got := make([]float32, b*s*nc), make([]float32, b*s*nc)
			kernels.IndexScore(want, q, b, s, h, di, k, nc, w)
			withLevel(l, func() { IndexScore(got, q, b, s, h, di, k, nc, w) })
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
					t.Fatalf("%v %v: [%d] = %g, want %g", l, sh, i, got[i], want[i])
				}
			}
		}
	}
}

// TestHCMixes checks bit-identity with kernels.HCMixes.
func TestHCMixes(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, l := range levels(t) {
		for _, sh := range [][3]int{{9, 4, 64}, {20, 4, 100}, {3, 4, 32}, {12, 2, 48}, {1, 4, 40}, {1, 3, 20}, {2, 2, 16}} {
			tokens, hc, dim := sh[0], sh[1], sh[2]
			mix := (2 + hc) * hc
			h := randF32(r, tokens*hc*dim, true)
			fn := randF32(r, mix*hc*dim, false)
			want, got := make([]float32, tokens*mix), make([]float32, tokens*mix)
			kernels.HCMixes(want, h, tokens, hc, dim, fn, 1e-6)
			var panels HCPanels
			for call := range 2 { // the second call reads the cached panels
				withLevel(l, func() { HCMixes(got, h, tokens, hc, dim, fn, 1e-6, &panels) })
				for i := range want {
					if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
						t.Fatalf("%v %v call %d: [%d] = %g, want %g", l, sh, call, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestHCPost checks HCPost and HCPre against the reference kernels bit for
// bit (signed zeros included: the sums start from +0; any NaN for a NaN).
func TestHCPost(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, sh := range [][3]int{{1, 4, 64}, {5, 4, 33}, {3, 2, 16}, {1, 4, 2048}, {7, 4, 40}} {
		tokens, hc, dim := sh[0], sh[1], sh[2]
		y := randF32(r, tokens*dim, true)
		res := randF32(r, tokens*hc*dim, true)
		post := randF32(r, tokens*hc, false)
		comb := randF32(r, tokens*hc*hc, false)
		for i := 0; i < len(res); i += 7 {
			res[i] = float32(math.Copysign(0, -1)) // -0 products
		}
		for i := 0; i < len(y); i += 5 {
			y[i] = float32(math.Copysign(0, -1))
		}
		res[1], y[2] = float32(math.Inf(1)), float32(math.NaN())
		for _, l := range levels(t) {
			want, got := make([]float32, tokens*hc*dim), make([]float32, tokens*hc*dim)
			kernels.HCPost(want, y, res, post, comb, tokens, hc, dim)
			withLevel(l, func() { HCPost(got, y, res, post, comb, tokens, hc, dim) })
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) {
					t.Fatalf("%v %v: [%d] = %g, want %g", l, sh, i, got[i], want[i])
				}
			}
			// HCPre on the same stream
			wantPre, gotPre := make([]float32, tokens*dim), make([]float32, tokens*dim)
			kernels.HCPre(wantPre, res, post, tokens, hc, dim)
			withLevel(l, func() { HCPre(gotPre, res, post, tokens, hc, dim) })
			for i := range wantPre {
				if math.Float32bits(wantPre[i]) != math.Float32bits(gotPre[i]) && !(wantPre[i] != wantPre[i] && gotPre[i] != gotPre[i]) {
					t.Fatalf("%v %v: pre [%d] = %g, want %g", l, sh, i, gotPre[i], wantPre[i])
				}
			}
		}
	}
}

// TestActQuant checks the vector act_quant against numfmt's, bit for bit:
// magnitudes over the whole e4m3 range (subnormal quanta, rounding ties, the
// 448 clamp), signed zeros, Inf/NaN blocks and scales beyond the fast range.
func TestActQuant(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	for _, l := range levels(t) {
		for _, block := range []int{32, 128, 8, 12} {
			for _, spread := range []float64{1e-30, 1e-6, 1, 1e3, 1e30} {
				x := make([]float32, 16*block)
				for i := range x {
					x[i] = float32(r.NormFloat64() * spread * math.Exp2(float64(r.IntN(24)-12)))
				}
				x[0] = float32(math.Copysign(0, -1))
				x[5] = 0
				x[3*block+1] = float32(math.Inf(1))
				x[5*block+2] = float32(math.NaN())
				for i := 7 * block; i < 8*block; i++ {
					x[i] = 0 // an all-zero block: the 1e-4 floor
				}
				// exact ties between e4m3 neighbours (1.0625 = 1 + 1/16 is halfway)
				for i := 9 * block; i < 10*block; i++ {
					x[i] = float32(448 * (1 + float64(i%16)/16) / 2)
				}
				want := append([]float32(nil), x...)
				numfmt.ActQuantInplace(want, block)
				got := append([]float32(nil), x...)
				withLevel(l, func() { ActQuant(got, block) })
				for i := range want {
					if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) {
						t.Fatalf("%v block %d spread %g: [%d] = %g (from %g), want %g", l, block, spread, i, got[i], x[i], want[i])
					}
				}
			}
		}
	}
}

// TestExpF32 checks the vector exp against float32(math.Exp(float64(x))),
// bit for bit, over the ranges the kernels meet (softmax arguments ≤ 0,
// SiLU's −g, large and tiny magnitudes), and that |x| > 700, NaN and Inf
// are reported rather than computed.
func TestExpF32(t *testing.T) {
	ks := avx2Set
	if why := Unsupported(AVX2); why != "" {
		t.Skipf("the AVX2 exp kernel is not tested: %s", why)
	}
	r := rand.New(rand.NewPCG(11, 11))
	const n = 1 << 16
	src, dst := make([]float32, n), make([]float32, n)
	for _, spread := range []float64{1e-6, 0.5, 3, 20, 90, 700} {
		for i := range src {
			src[i] = float32((2*r.Float64() - 1) * spread)
		}
		src[0], src[1], src[2] = 0, float32(math.Copysign(0, -1)), float32(spread)
		if !ks.expF32(dst, src) {
			t.Fatalf("spread %g: reported out of range", spread)
		}
		for i, x := range src {
			if want := float32(math.Exp(float64(x))); math.Float32bits(dst[i]) != math.Float32bits(want) {
				t.Fatalf("exp(%g) = %g (%#x), want %g (%#x)", x, dst[i], math.Float32bits(dst[i]), want, math.Float32bits(want))
			}
		}
	}
	for _, bad := range []float32{701, float32(math.Inf(1)), float32(math.NaN())} {
		in := []float32{1, 2, bad, 3}
		if ks.expF32(make([]float32, 4), in) {
			t.Errorf("exp of %g: not reported", bad)
		}
	}
	in := []float32{-701, float32(math.Inf(-1)), -1e30, -699.5}
	out := make([]float32, 4)
	if !ks.expF32(out, in) {
		t.Fatal("large negative arguments reported")
	}
	for i, x := range in {
		if want := float32(math.Exp(float64(x))); math.Float32bits(out[i]) != math.Float32bits(want) {
			t.Errorf("exp(%g) = %g, want %g", x, out[i], want)
		}
	}
}

// TestSwiGLUClamp checks the vector-exp SwiGLU against the reference
// kernel, bit for bit, with and without the clamp and route weights, with
// values that send exp past the kernel's range (the scalar fallback).
func TestSwiGLUClamp(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 12))
	for _, l := range levels(t) {
		for _, sh := range [][2]int{{6, 1536}, {1, 37}, {3, 4099}} {
			rows, inter := sh[0], sh[1]
			g := randF32(r, rows*inter, true)
			u := randF32(r, rows*inter, true)
			for i := range g {
				g[i] *= 8
			}
			g[5], g[len(g)-1] = -800, float32(math.Copysign(0, -1))
			nan, inf := float32(math.NaN()), float32(math.Inf(1))
			g[7], g[13], g[15], u[9], u[11], u[12], u[14] = nan, inf, -inf, nan, inf, -inf, 25
			w := randF32(r, rows, false)
			for _, limit := range []float32{0, 10} {
				for _, rw := range [][]float32{nil, w} {
					want, got := make([]float32, rows*inter), make([]float32, rows*inter)
					kernels.SwiGLUClamp(want, g, u, rows, inter, limit, rw)
					withLevel(l, func() { SwiGLUClamp(got, g, u, rows, inter, limit, rw) })
					for i := range want {
						if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) { // (any NaN for a NaN)
							t.Fatalf("%v %v limit %g: [%d] = %g (%#x), want %g (%#x)", l, sh, limit, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			}
		}
	}
}

// TestBF16RoundSlice checks the vector rounding against numfmt bit for bit:
// random bit patterns (NaNs with any payload, Infs, subnormals), exact ties
// and values that round up to Inf.
func TestBF16RoundSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 14))
	x := make([]float32, 4099)
	for i := range x {
		x[i] = math.Float32frombits(r.Uint32())
	}
	x[1] = math.Float32frombits(0x3F808000) // tie, even below
	x[2] = math.Float32frombits(0x3F818000) // tie, odd below
	x[3] = math.Float32frombits(0x7F7FFFFF) // rounds to Inf
	x[4] = math.Float32frombits(0x7F800001) // NaN with a low payload
	x[5] = math.Float32frombits(0xFFC00000)
	for _, l := range levels(t) {
		want, got := append([]float32(nil), x...), append([]float32(nil), x...)
		numfmt.BF16RoundSlice(want)
		withLevel(l, func() { BF16RoundSlice(got) })
		for i := range want {
			if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
				t.Fatalf("%v: [%d] %#x -> %#x, want %#x", l, i, math.Float32bits(x[i]), math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
		}
	}
}

// TestHCPanelsFollowFn checks that a panel cache used with another fn
// matrix (another program's weight) is rebuilt, not reused.
func TestHCPanelsFollowFn(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	const tokens, hc, dim = 1, 4, 32
	mix := (2 + hc) * hc
	h := randF32(r, tokens*hc*dim, true)
	var panels HCPanels
	for range 3 {
		fn := randF32(r, mix*hc*dim, false)
		want, got := make([]float32, tokens*mix), make([]float32, tokens*mix)
		kernels.HCMixes(want, h, tokens, hc, dim, fn, 1e-6)
		HCMixes(got, h, tokens, hc, dim, fn, 1e-6, &panels)
		for i := range want {
			if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
				t.Fatalf("[%d] = %g, want %g", i, got[i], want[i])
			}
		}
	}
}

// TestGroupedLoRANaNDirect puts NaN codes into wo_a with scales the direct
// (register-transposing) path takes, so its NaN detection and the Go
// fallback run.
func TestGroupedLoRANaNDirect(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 14))
	const m, groups, dg, rank = 2, 2, 64, 32
	rows := groups * rank
	o := randActs(r, m, groups*dg)
	codes, scales := randFP8(r, rows, dg)
	if !loraExact(scales) {
		t.Fatal("scales outside the direct path's range")
	}
	codes[17*dg+5], codes[40*dg+63] = 0x7F, 0xFF
	kbs := ceilDiv(dg, 32)
	w := make([]float32, rows*dg)
	for i := range rows {
		for d := range dg {
			w[i*dg+d] = numfmt.BF16Round(numfmt.E4M3ToF32(codes[i*dg+d]) * numfmt.E8M0ToF32(scales[(i/32)*kbs+d/32]))
		}
	}
	want, got := make([]float32, m*rows), make([]float32, m*rows)
	kernels.GroupedLoRA(want, o, m, groups, dg, w, rank)
	for _, l := range levels(t) {
		withLevel(l, func() { GroupedLoRA(got, o, m, groups, dg, nil, codes, scales, rank) })
		for i := range want {
			if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) {
				t.Fatalf("%v: [%d] = %g, want %g", l, i, got[i], want[i])
			}
		}
	}
}

// TestIndexTerms checks the indexer's vector per-head steps against the
// reference's scalar ones, bit for bit, on signed zeros, NaN, Inf, bf16
// ties and negative values.
func TestIndexTerms(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 16))
	for _, l := range levels(t) {
		var ks *kernelSet
		withLevel(l, func() { ks = current() })
		if ks.indexTerms == nil {
			continue
		}
		const h, nk = 24, 9
		e := randF32(r, h*nk, false)
		w := randF32(r, h, true)
		special := []float32{float32(math.Copysign(0, -1)), 0, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
			math.Float32frombits(0x3F808000), math.Float32frombits(0x3F818000), -1e-30, 3e38}
		copy(e[5:], special)
		want := make([]float32, h*nk)
		for j := range nk {
			for i := range h {
				ev := numfmt.BF16Round(e[j*h+i])
				if ev <= 0 {
					ev = 0
				}
				want[j*h+i] = numfmt.BF16Round(ev * w[i])
			}
		}
		got := make([]float32, h*nk)
		ks.indexTerms(got, e, w, h)
		for i := range want {
			if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) {
				t.Fatalf("%v: [%d] (e %g) = %g, want %g", l, i, e[i], got[i], want[i])
			}
		}
	}
}

// TestSparseAttnSplitIsConcat: the attention over a window's rows and the
// compressed rows as two inputs gives the bits of the attention over their
// concatenation, on every level and on the reference kernels, at batch 1
// and 2 and with a split at 0 rows.
func TestSparseAttnSplitIsConcat(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, sh := range [][7]int{{1, 1, 16, 64, 128, 300, 400}, {2, 3, 8, 32, 24, 45, 60}, {1, 2, 4, 64, 0, 30, 40}} {
		b, m, h, d, n1, n2, tt := sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], sh[6]
		n := n1 + n2
		q, sink := randF32(r, b*m*h*d, true), randF32(r, h, false)
		kv1, kv2 := randF32(r, b*n1*d, true), randF32(r, b*n2*d, true)
		kv := make([]float32, 0, b*n*d)
		for bi := range b {
			kv = append(append(kv, kv1[bi*n1*d:(bi+1)*n1*d]...), kv2[bi*n2*d:(bi+1)*n2*d]...)
		}
		idx := make([]int32, b*m*tt)
		for i := range idx {
			idx[i] = int32(r.IntN(n+n/8)) - int32(n/8)
			if idx[i] < 0 {
				idx[i] = -1
			}
		}
		same := func(what string, got, want []float32) {
			t.Helper()
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s %v: [%d] = %g, over the concatenation %g", what, sh, i, got[i], want[i])
				}
			}
		}
		want, got := make([]float32, b*m*h*d), make([]float32, b*m*h*d)
		kernels.SparseAttn(want, q, b, m, h, d, kv, n, sink, idx, tt, 0.125)
		kernels.SparseAttnSplit(got, q, b, m, h, d, kv1, n1, kv2, n2, sink, idx, tt, 0.125)
		same("kernels", got, want)
		for _, l := range levels(t) {
			withLevel(l, func() {
				SparseAttn(want, q, b, m, h, d, kv, n, sink, idx, tt, 0.125)
				SparseAttnSplit(got, q, b, m, h, d, kv1, n1, kv2, n2, sink, idx, tt, 0.125)
			})
			same(fmt.Sprint(l), got, want)
		}
	}
}
