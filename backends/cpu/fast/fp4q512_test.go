package fast

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFP4QAVX512SameAsAVX2 checks that the AVX-512 gemvFP4Q kernels give
// the AVX2 kernels' results bit for bit (integer sums in another order,
// the same float steps) at every row count of one call, 1 to 11 rows (the
// 8-row kernel and the 6 + 2 AVX2 split, odd chunk counts, a partial last
// block, any scale byte), and that each row of a many-row call is the
// one-row call's.
func TestFP4QAVX512SameAsAVX2(t *testing.T) {
	for _, l := range []Level{AVX2, AVX512} {
		if why := Unsupported(l); why != "" {
			t.Skipf("%v: %s", l, why)
		}
	}
	r := rand.New(rand.NewPCG(18, 1))
	for _, sh := range []struct{ k, n int }{{2048, 96}, {64, 40}, {96, 33}, {160, 64}, {200, 31}} {
		w, s := randFP4(r, sh.n, sh.k)
		for i := range s {
			if r.IntN(8) == 0 {
				s[i] = byte(r.IntN(256)) // 0 and 255 included
			}
		}
		s[0], s[len(s)-1] = 0, 255
		for m := 1; m <= 11; m++ {
			a := randActs(r, m, sh.k)
			var got [2][]float32
			for li, l := range []Level{AVX2, AVX512} {
				withLevel(l, func() {
					got[li] = make([]float32, m*sh.n)
					MatmulFP4PerRow(got[li], a, m, sh.k, w, s, sh.n)
				})
			}
			for li, l := range []Level{AVX2, AVX512} {
				for i := range m {
					one := make([]float32, sh.n)
					withLevel(l, func() { MatmulFP4(one, a[i*sh.k:(i+1)*sh.k], 1, sh.k, w, s, sh.n) })
					for j := range sh.n {
						if g, v := got[li][i*sh.n+j], one[j]; math.Float32bits(g) != math.Float32bits(v) {
							t.Fatalf("%v k=%d n=%d m=%d: row %d col %d: %g in the call, %g alone", l, sh.k, sh.n, m, i, j, g, v)
						}
					}
				}
			}
			for j, v := range got[0] {
				if g := got[1][j]; math.Float32bits(g) != math.Float32bits(v) && !(g != g && v != v) {
					t.Fatalf("%s: element %d: AVX-512 %g, AVX2 %g", fmt.Sprintf("k=%d n=%d m=%d", sh.k, sh.n, m), j, g, v)
				}
			}
		}
	}
}

// TestFP8AVX512SameAsAVX2 is TestFP4QAVX512SameAsAVX2 for the fp8 GEMV
// (odd and even block counts, a partial block, NaN codes).
func TestFP8AVX512SameAsAVX2(t *testing.T) {
	for _, l := range []Level{AVX2, AVX512} {
		if why := Unsupported(l); why != "" {
			t.Skipf("%v: %s", l, why)
		}
	}
	r := rand.New(rand.NewPCG(18, 2))
	for _, sh := range []struct{ k, n int }{{1024, 96}, {32, 40}, {96, 33}, {160, 64}, {200, 31}, {64, 70}} {
		w, s := randFP8(r, sh.n, sh.k)
		for _, nan := range []bool{false, true} {
			if nan {
				w[r.IntN(len(w))] = 0x7F
				w[r.IntN(len(w))] = 0xFF
			}
			for m := 1; m <= 19; m++ {
				a := randActs(r, m, sh.k)
				var got [2][]float32
				for li, l := range []Level{AVX2, AVX512} {
					withLevel(l, func() {
						got[li] = make([]float32, m*sh.n)
						MatmulFP8PerRow(got[li], a, m, sh.k, w, s, sh.n)
					})
				}
				for li, l := range []Level{AVX2, AVX512} {
					for i := range m {
						one := make([]float32, sh.n)
						withLevel(l, func() { MatmulFP8(one, a[i*sh.k:(i+1)*sh.k], 1, sh.k, w, s, sh.n) })
						for j := range sh.n {
							if g, v := got[li][i*sh.n+j], one[j]; math.Float32bits(g) != math.Float32bits(v) && !(g != g && v != v) {
								t.Fatalf("%v k=%d n=%d m=%d nan=%v: row %d col %d: %g in the call, %g alone", l, sh.k, sh.n, m, nan, i, j, g, v)
							}
						}
					}
				}
				for j, v := range got[0] {
					if g := got[1][j]; math.Float32bits(g) != math.Float32bits(v) && !(g != g && v != v) {
						t.Fatalf("k=%d n=%d m=%d nan=%v: element %d: AVX-512 %g, AVX2 %g", sh.k, sh.n, m, nan, j, g, v)
					}
				}
			}
		}
	}
}

// TestFP8AVX512EveryCode checks the AVX-512 fp8 GEMVs against the AVX2
// ones bit for bit on codes randFP8 seldom draws: every e4m3 code at each
// of a dword's four byte places (the AVX-512 kernels place a word's high
// and low code by VPMADDUBSW, the AVX2 ones by shifts), subnormal codes
// and the NaN codes among them, every scale byte the fused kernels take,
// 1 to 9 activation rows (the 1-, 2-, 3-, 4- and 8-row kernels and the
// splits), odd block counts and a partial last block.
func TestFP8AVX512EveryCode(t *testing.T) {
	for _, l := range []Level{AVX2, AVX512} {
		if why := Unsupported(l); why != "" {
			t.Skipf("%v: %s", l, why)
		}
	}
	r := rand.New(rand.NewPCG(18, 11))
	for _, sh := range []struct{ k, n int }{{1024, 40}, {96, 33}, {200, 32}, {32, 8}} {
		for _, codes := range []string{"cycle", "uniform", "nan"} {
			w := make([]byte, sh.n*sh.k)
			for i := range w {
				switch codes {
				case "cycle": // dword d of a row: codes d, d+64, d+128, d+192 (mod 256)
					w[i] = byte(i%sh.k/4 + 64*(i%4) + i/sh.k)
				default:
					w[i] = byte(r.IntN(256))
				}
				if codes != "nan" && w[i]&0x7F == 0x7F {
					w[i] ^= 1 // (NaN codes only in their own case)
				}
			}
			s := make([]byte, ceilDiv(sh.n, 32)*ceilDiv(sh.k, 32))
			for i := range s {
				s[i] = byte(r.IntN(maxFP8Scale + 1))
			}
			for m := 1; m <= 9; m++ {
				a := randActs(r, m, sh.k)
				var got [2][]float32
				for li, l := range []Level{AVX2, AVX512} {
					withLevel(l, func() {
						got[li] = make([]float32, m*sh.n)
						MatmulFP8PerRow(got[li], a, m, sh.k, w, s, sh.n)
					})
				}
				for j, v := range got[0] {
					if g := got[1][j]; math.Float32bits(g) != math.Float32bits(v) && !(g != g && v != v) {
						t.Fatalf("k=%d n=%d m=%d codes %s: element %d: AVX-512 %g, AVX2 %g", sh.k, sh.n, m, codes, j, g, v)
					}
				}
			}
		}
	}
}

// TestW16RowsSameAsOneRow checks that the bf16-weight matmuls give each
// row of a many-row call (the multi-row AVX-512 kernels) bit for bit as a
// one-row call, at every level, K with and without a tail past the last
// 16 or 64 elements.
func TestW16RowsSameAsOneRow(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 3))
	for _, sh := range []struct{ k, n int }{{2048, 40}, {16, 9}, {80, 33}, {200, 17}, {7, 5}} {
		w := make([]byte, 2*sh.n*sh.k)
		for i := range w {
			w[i] = byte(r.IntN(256))
		}
		for i := 1; i < len(w); i += 2 {
			w[i] &= 0x3f
		}
		for _, l := range levels(t) {
			for m := 1; m <= 13; m++ {
				a := randActs(r, m, sh.k)
				got := make([]float32, m*sh.n)
				one := make([]float32, sh.n)
				for _, round := range []bool{false, true} {
					withLevel(l, func() {
						if round {
							MatmulBF16W16PerRow(got, a, w, m, sh.k, sh.n)
						} else {
							MatmulF32W16PerRow(got, a, w, m, sh.k, sh.n)
						}
					})
					for i := range m {
						withLevel(l, func() {
							if round {
								MatmulBF16W16(one, a[i*sh.k:(i+1)*sh.k], w, 1, sh.k, sh.n)
							} else {
								MatmulF32W16(one, a[i*sh.k:(i+1)*sh.k], w, 1, sh.k, sh.n)
							}
						})
						for j := range sh.n {
							if g, v := got[i*sh.n+j], one[j]; math.Float32bits(g) != math.Float32bits(v) {
								t.Fatalf("%v k=%d n=%d m=%d round=%v: row %d col %d: %g in the call, %g alone", l, sh.k, sh.n, m, round, i, j, g, v)
							}
						}
					}
				}
			}
		}
	}
}

// TestSparseAttnAVX512SameAsAVX2: the attention at the avx512 level gives
// the avx2 level's bits (its P·V kernels on 16 lanes and over all heads at
// once, head dims ≡ 0 and 8 mod 16 and multiples of 64, whole and partial
// 4-key groups, keys of zero probability, prefill and decode shapes).
func TestSparseAttnAVX512SameAsAVX2(t *testing.T) {
	if Unsupported(AVX512) != "" || Unsupported(AVX2) != "" {
		t.Skip("needs the avx2 and avx512 levels")
	}
	r := rand.New(rand.NewPCG(18, 18))
	// the 7th figure scales the queries: 300 drives many probabilities
	// to zero (those keys are skipped, per head)
	for _, sh := range [][7]int{{1, 3, 16, 512, 700, 640, 4}, {1, 1, 16, 512, 300, 257, 4}, {1, 2, 16, 512, 300, 200, 300}, {2, 2, 8, 24, 40, 37, 4},
		{1, 2, 4, 72, 30, 41, 4}, {1, 1, 12, 136, 90, 130, 4}, {1, 2, 12, 128, 90, 130, 300}} {
		b, m, h, d, n, tt := sh[0], sh[1], sh[2], sh[3], sh[4], sh[5]
		q := randF32(r, b*m*h*d, true)
		for i := range q {
			q[i] *= float32(sh[6])
		}
		kv := randF32(r, b*n*d, true)
		sink := randF32(r, h, false)
		idx := make([]int32, b*m*tt)
		for i := range idx {
			idx[i] = max(-1, int32(r.IntN(n+n/4))-int32(n/4))
		}
		want, got := make([]float32, b*m*h*d), make([]float32, b*m*h*d)
		withLevel(AVX2, func() { SparseAttn(want, q, b, m, h, d, kv, n, sink, idx, tt, 0.125) })
		withLevel(AVX512, func() { SparseAttn(got, q, b, m, h, d, kv, n, sink, idx, tt, 0.125) })
		for i := range want {
			if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
				t.Fatalf("%v: [%d] = %g at avx512, %g at avx2", sh, i, got[i], want[i])
			}
		}
	}
}
