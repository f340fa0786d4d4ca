package kernels

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/internal/safetensors"
)

// Shared helpers of the gemm/norm/hc/rope/expert tests (prefixed to stay
// clear of the other kernel tests of this package).

var gemmTinyDir = filepath.Join("..", "..", "..", "testdata", "tiny")

var (
	gemmFilesMu sync.Mutex
	gemmFiles   = map[string]*safetensors.File{}
)

// gemmOpen opens (once per test binary) a safetensors file of testdata/tiny.
func gemmOpen(t testing.TB, name string) *safetensors.File {
	t.Helper()
	gemmFilesMu.Lock()
	defer gemmFilesMu.Unlock()
	if f, ok := gemmFiles[name]; ok {
		return f
	}
	f, err := safetensors.Open(filepath.Join(gemmTinyDir, name))
	if err != nil {
		t.Skipf("golden data not available: %v", err)
	}
	gemmFiles[name] = f
	return f
}

// gemmSource is a safetensors file or set.
type gemmSource interface {
	Get(name string) (*safetensors.Tensor, bool)
}

// gemmTensor returns the named tensor, failing the test if absent.
func gemmTensor(t testing.TB, f gemmSource, name string) *safetensors.Tensor {
	t.Helper()
	x, ok := f.Get(name)
	if !ok {
		t.Fatalf("no tensor %q", name)
	}
	return x
}

// gemmF32 returns the named tensor as float32 values.
func gemmF32(t testing.TB, f gemmSource, name string) []float32 {
	t.Helper()
	v, err := gemmTensor(t, f, name).Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// gemmBytes returns the raw bytes of the named tensor (fp8 codes, e8m0
// scales, packed fp4).
func gemmBytes(t testing.TB, f gemmSource, name string) []byte {
	t.Helper()
	return gemmTensor(t, f, name).Data
}

// ulpDiff returns the distance between two bf16 values in bf16 ulps (the
// number of representable bf16 values between them, counting across zero;
// +0 and -0 are 0 apart). Non-bf16 inputs are rounded first; NaN against
// anything but NaN is MaxInt.
func ulpDiff(a, b float32) int {
	an, bn := a != a, b != b
	if an || bn {
		if an && bn {
			return 0
		}
		return math.MaxInt
	}
	return ulpAbs(ulpOrdinal(a) - ulpOrdinal(b))
}

// ulpOrdinal maps a float32 to the ordinal of its bf16 rounding: monotone in the
// value, consecutive bf16 values differ by one.
func ulpOrdinal(v float32) int {
	b := int(numfmt.BF16Bits(v))
	if b&0x8000 != 0 {
		return -(b & 0x7fff)
	}
	return b
}

func ulpAbs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// gemmCheckULP compares bf16 outputs with the README tolerance: every element
// within 2 bf16 ulps and at most 1% of them at 2 ulps (the rest within 1).
// It logs the histogram and returns the maximum distance.
func gemmCheckULP(t *testing.T, name string, got, want []float32) int {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	var hist [3]int
	worst, at := 0, -1
	for i := range got {
		d := ulpDiff(got[i], want[i])
		if d > worst {
			worst, at = d, i
		}
		hist[min(d, 2)]++
	}
	t.Logf("%s: %d values, max %d bf16 ulp; exact %d, 1 ulp %d, >=2 ulp %d", name, len(got), worst, hist[0], hist[1], hist[2])
	if worst > 2 || float64(hist[2]) > 0.01*float64(len(got)) {
		t.Errorf("%s: max %d ulp (element %d: got %g want %g), %d elements at >= 2 ulp", name, worst, at, got[at], want[at], hist[2])
	}
	return worst
}

// gemmCheckRel compares fp32 results elementwise: |got-want| <= tol·max(|want|, floor)
// for every element. It logs the maximum relative error and the relative L2
// error and returns the maximum relative error.
func gemmCheckRel(t *testing.T, name string, got, want []float32, tol, floor float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	worst, at := 0.0, 0
	var num, den float64
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		d := math.Abs(g - w)
		num += d * d
		den += w * w
		r := d / max(math.Abs(w), floor)
		if r > worst || r != r {
			worst, at = r, i
		}
	}
	t.Logf("%s: %d values, max rel %.3g, rel L2 %.3g", name, len(got), worst, math.Sqrt(num/max(den, 1e-300)))
	if !(worst <= tol) {
		t.Errorf("%s: element %d: got %g want %g (rel %.3g > %.3g)", name, at, got[at], want[at], worst, tol)
	}
	return worst
}

// gemmDequantAct returns bf16(e4m3(q)·e8m0(s)) for act_quant codes q [m,k] and
// scales s [m,k/32]: the fake-quantised activations the GEMMs take.
func gemmDequantAct(q, s []byte, m, k int) []float32 {
	a := make([]float32, m*k)
	kb := k / gemmBlock
	for i := range m {
		for c := range k {
			a[i*k+c] = numfmt.BF16Round(numfmt.E4M3ToF32(q[i*k+c]) * numfmt.E8M0ToF32(s[i*kb+c/gemmBlock]))
		}
	}
	return a
}

func TestMatmulFP8Golden(t *testing.T) {
	f := gemmOpen(t, "ops.safetensors")
	a := gemmDequantAct(gemmBytes(t, f, "gemm.a_q"), gemmBytes(t, f, "gemm.a_scale"), 5, 128)
	// The dequantised activations are exactly what ActQuant writes back for gemm.x.
	x := gemmF32(t, f, "gemm.x")
	numfmt.ActQuantInplace(x, gemmBlock)
	for i := range x {
		if x[i] != a[i] {
			t.Fatalf("ActQuant(gemm.x)[%d] = %g, dequantised a_q = %g", i, x[i], a[i])
		}
	}
	out := make([]float32, 5*96)
	MatmulFP8(out, a, 5, 128, gemmBytes(t, f, "fp8_gemm.b_q"), gemmBytes(t, f, "fp8_gemm.b_scale"), 96)
	gemmCheckULP(t, "fp8_gemm.out", out, gemmF32(t, f, "fp8_gemm.out"))
}

func TestMatmulFP4Golden(t *testing.T) {
	f := gemmOpen(t, "ops.safetensors")
	a := gemmDequantAct(gemmBytes(t, f, "gemm.a_q"), gemmBytes(t, f, "gemm.a_scale"), 5, 128)
	out := make([]float32, 5*96)
	MatmulFP4(out, a, 5, 128, gemmBytes(t, f, "fp4_gemm.b_packed"), gemmBytes(t, f, "fp4_gemm.b_scale"), 96)
	gemmCheckULP(t, "fp4_gemm.out", out, gemmF32(t, f, "fp4_gemm.out"))
}

// gemmNaiveFP8 is an independent float64 model of MatmulFP8 for odd shapes.
func gemmNaiveFP8(a []float32, m, k int, w, ws []byte, n int) []float32 {
	kb := (k + 31) / 32
	out := make([]float32, m*n)
	for i := range m {
		for j := range n {
			var acc float64
			for c := range k {
				acc += float64(a[i*k+c]) * float64(numfmt.E4M3ToF32(w[j*k+c])) * float64(numfmt.E8M0ToF32(ws[(j/32)*kb+c/32]))
			}
			out[i*n+j] = numfmt.BF16Round(float32(acc))
		}
	}
	return out
}

func TestMatmulFP8RaggedShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sh := range [][3]int{{3, 40, 33}, {2, 31, 5}, {1, 64, 70}} {
		m, k, n := sh[0], sh[1], sh[2]
		a := make([]float32, m*k)
		for i := range a {
			a[i] = numfmt.E4M3ToF32(byte(r.IntN(0x7e))) * 0.25 // exact, small
		}
		w := make([]byte, n*k)
		for i := range w {
			w[i] = byte(r.IntN(0x7e)) | byte(r.IntN(2))<<7
		}
		ws := make([]byte, ((n+31)/32)*((k+31)/32))
		for i := range ws {
			ws[i] = byte(120 + r.IntN(8))
		}
		got := make([]float32, m*n)
		MatmulFP8(got, a, m, k, w, ws, n)
		want := gemmNaiveFP8(a, m, k, w, ws, n)
		for i := range got {
			if d := ulpDiff(got[i], want[i]); d > 1 {
				t.Errorf("m,k,n=%v: element %d: got %g want %g (%d ulp)", sh, i, got[i], want[i], d)
			}
		}
	}
}

func TestMatmulF32BF16LoRA(t *testing.T) {
	a := []float32{1, 2, 3, 4, 5, 6}        // [2,3]
	w := []float32{1, 0, -1, 0.5, 0.5, 0.5} // [2,3]
	out := make([]float32, 4)
	MatmulF32(out, a, w, 2, 3, 2)
	want := []float32{-2, 3, -2, 7.5}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("MatmulF32 = %v, want %v", out, want)
		}
	}
	MatmulBF16(out, []float32{1, 1.0078125, 0, 0, 0, 0}, []float32{1, 1, 0, 0, 0, 0}, 2, 3, 2)
	if out[0] != 2 { // 2.0078125 rounds to bf16 2
		t.Fatalf("MatmulBF16 rounding: got %g want 2", out[0])
	}
	// groups=2, dg=2, rank=1: u[g] = o[g*2:g*2+2]·woA[g]
	u := make([]float32, 2)
	GroupedLoRA(u, []float32{1, 2, 3, 4}, 1, 2, 2, []float32{1, 1, 2, -1}, 1)
	if u[0] != 3 || u[1] != 2 {
		t.Fatalf("GroupedLoRA = %v, want [3 2]", u)
	}
}
