package backendtest

import (
	"fmt"
	"math"
	"slices"

	"github.com/ds4go/ds4/backends"
)

// TolKind is how a case's outputs are compared with the reference's.
type TolKind uint8

// Tolerance kinds.
const (
	// Exact: every element bit-identical (any NaN equals any NaN); integer
	// and mask outputs equal.
	Exact TolKind = iota
	// BF16ULP: every element within ULP bf16 units in the last place, and
	// within ULP+1 in at most Frac of the elements (the golden README's
	// unit-op rule for products: ULP 1, Frac 0.01); with Floor > 0 an
	// element also passes when |got-want| ≤ Floor·max|want| (outputs near
	// zero that are cancelling sums, whose own ulps are tiny).
	BF16ULP
	// Scaled: max |got-want| ≤ Rel · max |want| over the tensor: for fp32
	// sums whose order a backend may change (the error of a reordered sum
	// scales with the terms, not with the possibly cancelled result).
	Scaled
	// RelAbs: every element |got-want| ≤ Abs + Rel·|want|.
	RelAbs
	// F32ULP: every element within ULP float32 units in the last place.
	F32ULP
)

// Tol is a case's tolerance and the reason for it.
type Tol struct {
	Kind  TolKind
	ULP   int
	Frac  float64
	Floor float64
	Rel   float64
	Abs   float64
	Why   string
}

func (t Tol) String() string {
	switch t.Kind {
	case BF16ULP:
		s := fmt.Sprintf("≤ %d bf16 ulp (%d in ≤ %g of elements)", t.ULP, t.ULP+1, t.Frac)
		if t.Floor > 0 {
			s += fmt.Sprintf(" or |Δ| ≤ %.3g·max|want|", t.Floor)
		}
		return s
	case Scaled:
		return fmt.Sprintf("max|Δ| ≤ %g·max|want|", t.Rel)
	case RelAbs:
		return fmt.Sprintf("|Δ| ≤ %g + %g·|want|", t.Abs, t.Rel)
	case F32ULP:
		return fmt.Sprintf("≤ %d f32 ulp", t.ULP)
	}
	return "bit-exact"
}

// The tolerances the cases share, each with its reason.
var (
	exact = func(why string) Tol { return Tol{Kind: Exact, Why: why} }
	// golden is the golden README's unit-op rule for products, attention,
	// rotary and RMSNorm outputs rounded to bf16, with a floor: an output
	// near zero is a cancelling sum whose own ulps are far below the
	// rounding error of its terms, which a reordered fp32 sum (vector lanes,
	// K blocks, tensor cores) moves by a few 2^-24 of the output's scale.
	golden = Tol{Kind: BF16ULP, ULP: 1, Frac: 0.01, Floor: 1.0 / (1 << 18),
		Why: "golden unit-op rule: fp32 sums in another order may cross a bf16 rounding boundary (1 ulp; 2 ulp in ≤ 1 % of elements); outputs near zero (cancelling sums) within 2^-18 of the output's scale"}
	// reorder32 bounds fp32 dot products of up to ~20k terms whose order a
	// backend changes (blocked or vector sums): the error is a few 2^-24 of
	// the terms' magnitude times √K, far below 1e-5 of the result's scale.
	reorder32 = Tol{Kind: Scaled, Rel: 1e-5,
		Why: "fp32 sums of ≤ 20480 terms in another order: ~√K·2^-24 of the terms' size, < 1e-5 of the output's scale"}
)

// Diff summarises a comparison.
type Diff struct {
	N        int     // elements compared
	Differ   int     // elements not bit-identical
	MaxULP   int     // largest bf16 ulp distance (float outputs)
	MaxF32   int     // largest float32 ulp distance
	OverULP  int     // elements beyond the tolerance's ULP (BF16ULP)
	Floored  int     // elements beyond ULP+1 that pass by the tolerance's Floor
	MaxFloor float64 // their largest |got-want| / max|want|
	MaxAbs   float64 // largest |got-want|
	MaxRel   float64 // largest |got-want|/|want| over elements with want ≠ 0
	Scale    float64 // max |want|
	First    string  // the first differing element
}

func (d Diff) String() string {
	s := fmt.Sprintf("%d elements, %d differ", d.N, d.Differ)
	if d.Differ > 0 {
		s += fmt.Sprintf(", max %d bf16 ulp (%d f32 ulp), max |Δ| %.3g (%.3g of max|want| %.3g), max rel %.3g; %s",
			d.MaxULP, d.MaxF32, d.MaxAbs, d.MaxAbs/math.Max(d.Scale, math.SmallestNonzeroFloat64), d.Scale, d.MaxRel, d.First)
	}
	if d.Floored > 0 {
		s += fmt.Sprintf("; %d beyond the ulp rule within the floor (max |Δ| %.3g of max|want|)", d.Floored, d.MaxFloor)
	}
	return s
}

// ULPs is the distance of two float32 values in units in the last place
// of a format whose low drop bits are cut (16: bf16, whose values need not
// be bf16; 0: float32); 0 when both are NaN, MaxInt when one is. Kernel
// tests of a backend measure with it as the suite does.
func ULPs(a, b float32, drop uint) int {
	if a != a || b != b {
		if a != a && b != b {
			return 0
		}
		return math.MaxInt
	}
	key := func(f float32) int64 {
		u := math.Float32bits(f)
		m := int64(u&0x7fffffff) >> drop
		if u&0x80000000 != 0 {
			return -m
		}
		return m
	}
	d := key(a) - key(b)
	if d < 0 {
		d = -d
	}
	return int(d)
}

// Compare measures got against want and applies tol; the error names the
// first problem.
func Compare(got, want *backends.Tensor, tol Tol) (Diff, error) {
	if got == nil {
		return Diff{}, fmt.Errorf("no output")
	}
	if got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) {
		return Diff{}, fmt.Errorf("got %v%v, want %v%v", got.DType, got.Shape, want.DType, want.Shape)
	}
	if want.DType.IsFloat() {
		return compareFloats(got.F32, want.F32, tol)
	}
	return compareInts(got, want)
}

func compareInts(got, want *backends.Tensor) (Diff, error) {
	a, b := intsOf(got), intsOf(want)
	d := Diff{N: len(b)}
	if len(a) != len(b) {
		return d, fmt.Errorf("%d values, want %d", len(a), len(b))
	}
	for i := range b {
		if a[i] != b[i] {
			if d.Differ == 0 {
				d.First = fmt.Sprintf("[%d] = %d, want %d", i, a[i], b[i])
			}
			d.Differ++
		}
	}
	if d.Differ > 0 {
		return d, fmt.Errorf("%d of %d values differ; first %s", d.Differ, d.N, d.First)
	}
	return d, nil
}

func intsOf(t *backends.Tensor) []int64 {
	switch {
	case t.I64 != nil:
		return t.I64
	case t.I32 != nil:
		out := make([]int64, len(t.I32))
		for i, v := range t.I32 {
			out[i] = int64(v)
		}
		return out
	}
	out := make([]int64, len(t.U8))
	for i, v := range t.U8 {
		out[i] = int64(v)
	}
	return out
}

func compareFloats(got, want []float32, tol Tol) (Diff, error) {
	d := Diff{N: len(want)}
	if len(got) != len(want) {
		return d, fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	for _, w := range want {
		if !math.IsInf(float64(w), 0) && w == w {
			d.Scale = math.Max(d.Scale, math.Abs(float64(w)))
		}
	}
	var bad string
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g) == math.Float32bits(w) || (g != g && w != w) {
			continue
		}
		if d.Differ == 0 {
			d.First = fmt.Sprintf("first at [%d]: got %g, want %g", i, g, w)
		}
		d.Differ++
		u, u32 := ULPs(g, w, 16), ULPs(g, w, 0)
		d.MaxULP, d.MaxF32 = max(d.MaxULP, u), max(d.MaxF32, u32)
		ad := math.Abs(float64(g) - float64(w))
		if math.IsNaN(ad) || math.IsInf(float64(g), 0) != math.IsInf(float64(w), 0) {
			ad = math.Inf(1)
		}
		d.MaxAbs = math.Max(d.MaxAbs, ad)
		if w != 0 {
			d.MaxRel = math.Max(d.MaxRel, ad/math.Abs(float64(w)))
		}
		switch tol.Kind {
		case Exact:
			bad = "not bit-exact"
		case BF16ULP:
			if u > tol.ULP && tol.Floor > 0 && ad <= tol.Floor*d.Scale {
				d.Floored++
				d.MaxFloor = math.Max(d.MaxFloor, ad/d.Scale)
			} else if u > tol.ULP+1 && bad == "" {
				bad = fmt.Sprintf("[%d] %d bf16 ulp off (got %g, want %g)", i, u, g, w)
			} else if u > tol.ULP {
				d.OverULP++
			}
		case F32ULP:
			if u32 > tol.ULP && bad == "" {
				bad = fmt.Sprintf("[%d] %d f32 ulp off (got %g, want %g)", i, u32, g, w)
			}
		case RelAbs:
			if ad > tol.Abs+tol.Rel*math.Abs(float64(w)) && bad == "" {
				bad = fmt.Sprintf("[%d] got %g, want %g", i, g, w)
			}
		}
	}
	switch {
	case bad != "":
	case tol.Kind == BF16ULP && float64(d.OverULP) > tol.Frac*float64(d.N):
		bad = fmt.Sprintf("%d elements (more than %g of %d) are %d bf16 ulp off", d.OverULP, tol.Frac, d.N, tol.ULP+1)
	case tol.Kind == Scaled && !(d.MaxAbs <= tol.Rel*d.Scale):
		bad = fmt.Sprintf("max |Δ| %.3g exceeds %g of max|want| %.3g", d.MaxAbs, tol.Rel, d.Scale)
	}
	if bad != "" {
		return d, fmt.Errorf("%s, want %s: %v", bad, tol, d)
	}
	return d, nil
}
