package fast

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/internal/numfmt"
)

// levelsLogged holds the tests that have logged the levels they skip.
var levelsLogged sync.Map

// levels returns the levels this CPU can run, and logs each level it
// cannot with the CPU feature it lacks (CI may run on AVX2 or AVX-512
// hosts: a level left out here must say so).
func levels(tb testing.TB) []Level {
	tb.Helper()
	var ls []Level
	for _, l := range []Level{Portable, AVX2, AVX512} {
		if why := Unsupported(l); why != "" {
			if _, seen := levelsLogged.LoadOrStore(tb.Name()+l.String(), true); !seen {
				tb.Logf("kernel level %v not tested: %s", l, why)
			}
			continue
		}
		ls = append(ls, l)
	}
	return ls
}

// withLevel runs fn at level l and restores the previous level.
func withLevel(l Level, fn func()) {
	prev := SetLevel(l)
	defer SetLevel(prev)
	fn()
}

func randActs(r *rand.Rand, m, k int) []float32 {
	a := make([]float32, m*k)
	for i := range a {
		a[i] = float32(r.NormFloat64()) * 3
	}
	// as the model feeds fp8/fp4 Linears: act_quant over the whole 32-blocks
	// of each row (the tail of a row, which the released shapes never have,
	// rounded to bf16)
	for i := range m {
		row := a[i*k : (i+1)*k]
		numfmt.ActQuantInplace(row[:k&^31], 32)
		numfmt.BF16RoundSlice(row[k&^31:])
	}
	return a
}

func randFP8(r *rand.Rand, n, k int) (w, s []byte) {
	w = make([]byte, n*k)
	for i := range w {
		w[i] = numfmt.F32ToE4M3(float32(r.NormFloat64() * 120))
	}
	s = make([]byte, ceilDiv(n, 32)*ceilDiv(k, 32))
	for i := range s {
		s[i] = byte(115 + r.IntN(12))
	}
	return w, s
}

func randFP4(r *rand.Rand, n, k int) (w, s []byte) {
	w = make([]byte, n*k/2)
	for i := range w {
		w[i] = byte(r.IntN(256))
	}
	s = make([]byte, n*ceilDiv(k, 32))
	for i := range s {
		s[i] = byte(118 + r.IntN(12))
	}
	return w, s
}

func randF32(r *rand.Rand, n int, bf16 bool) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	if bf16 {
		numfmt.BF16RoundSlice(x)
	}
	return x
}

// bf16Ord maps a bf16 value to an integer whose differences count ulps.
func bf16Ord(f float32) int {
	b := int(numfmt.BF16Bits(f))
	if b&0x8000 != 0 {
		return -(b & 0x7fff)
	}
	return b
}

// magnitudes returns Σ_k |a·w| per output element (w dequantised [n,k]):
// the scale of the fp32 rounding error of any summation order.
func magnitudes(a, w []float32, m, k, n int) []float64 {
	mag := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for c := range k {
				s += math.Abs(float64(a[i*k+c]) * float64(w[j*k+c]))
			}
			mag[i*n+j] = s
		}
	}
	return mag
}

// fp4Tolerance adds to mag the bound of the fp4 kernels' 16-bit activations
// (packFP4Q), scaled for compareBF16's 1e-6·mag test: per output Σ over the
// 32-blocks of amax·2^-15·Σ|w| (half the integer grid's step; exact codes
// contribute nothing, so the bound is loose).
func fp4Tolerance(mag []float64, a, w []float32, m, k, n int) []float64 {
	out := append([]float64(nil), mag...)
	for i := range m {
		for j := range n {
			var b float64
			for c0 := 0; c0+32 <= k; c0 += 32 {
				var amax, ws float64
				for c := c0; c < c0+32; c++ {
					amax = math.Max(amax, math.Abs(float64(a[i*k+c])))
					ws += math.Abs(float64(w[j*k+c]))
				}
				b += amax * math.Ldexp(1, -15) * ws
			}
			out[i*n+j] += b * 1e6
		}
	}
	return out
}

func dequantFP8(w, s []byte, n, k int) []float32 {
	d := make([]float32, n*k)
	kb := ceilDiv(k, 32)
	for j := range n {
		for c := range k {
			d[j*k+c] = lutE4M3[w[j*k+c]] * lutE8M0[s[(j/32)*kb+c/32]]
		}
	}
	return d
}

func dequantFP4(w, s []byte, n, k int) []float32 {
	d := make([]float32, n*k)
	kb := ceilDiv(k, 32)
	for j := range n {
		for c := range k {
			q := w[(j*k+c)/2]
			if c%2 == 1 {
				q >>= 4
			}
			d[j*k+c] = lutE2M1[q&15] * lutE8M0[s[j*kb+c/32]]
		}
	}
	return d
}

// compareBF16 checks the golden tolerance: every element within 2 bf16 ulps,
// at most 1 % more than 1 ulp away. Elements whose difference is below the
// fp32 summation error of the reference itself (1e-6·Σ|a·w|, heavy
// cancellation in random data) are excused when mag is given.
func compareBF16(t *testing.T, what string, got, want []float32, mag []float64) {
	t.Helper()
	over1 := 0
	for i := range want {
		g, w := got[i], want[i]
		if mag != nil && math.Abs(float64(g-w)) <= 1e-6*mag[i] {
			continue
		}
		if g != g || w != w {
			if (g != g) != (w != w) {
				t.Fatalf("%s: [%d] = %v, want %v", what, i, g, w)
			}
			continue
		}
		if numfmt.BF16Round(g) != g {
			t.Fatalf("%s: [%d] = %v is not a bf16 value", what, i, g)
		}
		d := bf16Ord(g) - bf16Ord(w)
		if d < 0 {
			d = -d
		}
		if d > 2 {
			t.Fatalf("%s: [%d] = %v, want %v (%d ulps)", what, i, g, w, d)
		}
		if d > 1 {
			over1++
		}
	}
	if over1*100 > len(want) {
		t.Fatalf("%s: %d of %d elements more than 1 ulp away", what, over1, len(want))
	}
}

func compareF32(t *testing.T, what string, got, want, a, w []float32, m, k, n int) {
	t.Helper()
	for i := range m {
		for j := range n {
			var mag float64
			for c := range k {
				mag += math.Abs(float64(a[i*k+c]) * float64(w[j*k+c]))
			}
			g, x := got[i*n+j], want[i*n+j]
			if math.Abs(float64(g-x)) > 1e-6*mag+1e-30 {
				t.Fatalf("%s: [%d,%d] = %v, want %v", what, i, j, g, x)
			}
		}
	}
}

var shapes = []struct{ k, n int }{
	{32, 32}, {64, 48}, {96, 70}, {200, 33}, {512, 130}, {1000, 257}, {70, 5},
}

var ms = []int{1, 2, 7, 11, 64, 300} // 11: a 6-row pass and a 5-row rest (4 + 1)

func TestMatmulFP8(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sh := range shapes {
		for _, m := range ms {
			a := randActs(r, m, sh.k)
			w, s := randFP8(r, sh.n, sh.k)
			want := make([]float32, m*sh.n)
			kernels.MatmulFP8(want, a, m, sh.k, w, s, sh.n)
			mag := magnitudes(a, dequantFP8(w, s, sh.n, sh.k), m, sh.k, sh.n)
			for _, l := range levels(t) {
				got := make([]float32, m*sh.n)
				withLevel(l, func() { MatmulFP8(got, a, m, sh.k, w, s, sh.n) })
				compareBF16(t, fmt.Sprintf("fp8 %v m=%d k=%d n=%d", l, m, sh.k, sh.n), got, want, mag)
			}
		}
	}
}

func TestMatmulFP4(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, sh := range shapes {
		k := sh.k &^ 1
		for _, m := range ms {
			a := randActs(r, m, k)
			w, s := randFP4(r, sh.n, k)
			want := make([]float32, m*sh.n)
			kernels.MatmulFP4(want, a, m, k, w, s, sh.n)
			deq := dequantFP4(w, s, sh.n, k)
			mag := fp4Tolerance(magnitudes(a, deq, m, k, sh.n), a, deq, m, k, sh.n)
			for _, l := range levels(t) {
				got := make([]float32, m*sh.n)
				withLevel(l, func() { MatmulFP4(got, a, m, k, w, s, sh.n) })
				compareBF16(t, fmt.Sprintf("fp4 %v m=%d k=%d n=%d", l, m, k, sh.n), got, want, mag)
			}
		}
	}
}

func TestMatmulF32BF16(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, sh := range shapes {
		for _, m := range ms {
			a := randF32(r, m*sh.k, true)
			w := randF32(r, sh.n*sh.k, true)
			want := make([]float32, m*sh.n)
			kernels.MatmulF32(want, a, w, m, sh.k, sh.n)
			mag := magnitudes(a, w, m, sh.k, sh.n)
			wantB := make([]float32, m*sh.n)
			kernels.MatmulBF16(wantB, a, w, m, sh.k, sh.n)
			for _, l := range levels(t) {
				got := make([]float32, m*sh.n)
				withLevel(l, func() { MatmulF32(got, a, w, m, sh.k, sh.n) })
				what := fmt.Sprintf("%v m=%d k=%d n=%d", l, m, sh.k, sh.n)
				compareF32(t, "f32 "+what, got, want, a, w, m, sh.k, sh.n)
				withLevel(l, func() { MatmulBF16(got, a, w, m, sh.k, sh.n) })
				compareBF16(t, "bf16 "+what, got, wantB, mag)
			}
		}
	}
}

// TestSpecialCodes covers NaN e4m3 codes, NaN/extreme scales and subnormal
// codes, which the assembly paths detect or route to the portable kernels.
func TestSpecialCodes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const n = 64
	for _, km := range [][2]int{{96, 1}, {96, 8}, {320, 1}, {320, 5}} {
		k, m := km[0], km[1]
		a := randActs(r, m, k)
		w, s := randFP8(r, n, k)
		w[5*k+40] = 0x7f // NaN in row 5
		w[40*k+3] = 0xff // NaN in row 40
		w[20*k+7] = 0x03 // subnormal
		w[21*k+9] = 0x85 // negative subnormal
		s[1] = 140       // scale beyond the fused range
		w4, s4 := randFP4(r, n, k)
		s4[7] = 0
		s4[9] = 0xff
		s4[len(s4)-2] = 0 // (k = 320: the last pair of a row's 10 blocks)
		for _, l := range levels(t) {
			want := make([]float32, m*n)
			got := make([]float32, m*n)
			kernels.MatmulFP8(want, a, m, k, w, s, n)
			withLevel(l, func() { MatmulFP8(got, a, m, k, w, s, n) })
			compareBF16(t, fmt.Sprintf("fp8 special %v k=%d m=%d", l, k, m), got, want, nil)
			s[1] = 120
			kernels.MatmulFP8(want, a, m, k, w, s, n)
			withLevel(l, func() { MatmulFP8(got, a, m, k, w, s, n) })
			compareBF16(t, fmt.Sprintf("fp8 NaN %v m=%d", l, m), got, want, nil)
			s[1] = 140
			kernels.MatmulFP4(want, a, m, k, w4, s4, n)
			withLevel(l, func() { MatmulFP4(got, a, m, k, w4, s4, n) })
			compareBF16(t, fmt.Sprintf("fp4 special %v k=%d m=%d", l, k, m), got, want, nil)
		}
	}
}

func TestLevels(t *testing.T) {
	t.Logf("max level %v, current %v", MaxLevel(), CurrentLevel())
	prev := SetLevel(Portable)
	if CurrentLevel() != Portable {
		t.Fatal("SetLevel(Portable) did not take")
	}
	SetLevel(AVX512 + 5)
	if CurrentLevel() != MaxLevel() {
		t.Fatal("SetLevel did not clamp")
	}
	SetLevel(prev)
}

// TestPermuteFP8x32Pairs: each pair of whole 32-blocks holds, vector by
// vector, permuteFP8x32's vector of the even block then the odd block's;
// an odd last block and the tail are as permuteFP8x32 leaves them.
func TestPermuteFP8x32Pairs(t *testing.T) {
	for _, k := range []int{0, 5, 32, 64, 70, 96, 128, 200, 256} {
		a := make([]float32, k)
		for i := range a {
			a[i] = float32(i)
		}
		want, got := make([]float32, k), make([]float32, k)
		permuteFP8x32(want, a, 1)
		for c := 0; c+64 <= k&^31; c += 64 {
			p := slices.Clone(want[c : c+64])
			for v := range 4 {
				copy(want[c+16*v:c+16*v+8], p[8*v:8*v+8])
				copy(want[c+16*v+8:c+16*v+16], p[32+8*v:32+8*v+8])
			}
		}
		permuteFP8x32Pairs(got, a, 1)
		if !slices.Equal(got, want) {
			t.Fatalf("k=%d: %v, want %v", k, got, want)
		}
	}
}
