package cuda

// GPU tests of the unfused graph ops (generic.go) against the cpu backend's
// definitions (backends/cpu/ops.go: the unary closures are repeated here as
// ops.go writes them; the rest call backends/cpu/kernels).

import (
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/internal/numfmt"
)

// unaryRef is ops.go's kernel of each unary op, before the dtype rounding.
var unaryRef = map[string]func(x, p0, p1 float32) float32{
	"cast":    func(x, _, _ float32) float32 { return x },
	"sigmoid": func(x, _, _ float32) float32 { o := []float32{0}; kernels.Sigmoid(o, []float32{x}); return o[0] },
	"silu":    func(x, _, _ float32) float32 { o := []float32{0}; kernels.SiLU(o, []float32{x}); return o[0] },
	"rsqrt":   func(x, _, _ float32) float32 { o := []float32{0}; kernels.Rsqrt(o, []float32{x}); return o[0] },
	"sqrt":    func(x, _, _ float32) float32 { return float32(math.Sqrt(float64(x))) },
	"exp":     func(x, _, _ float32) float32 { return float32(math.Exp(float64(x))) },
	"relu":    func(x, _, _ float32) float32 { return max(x, 0) },
	"softplus": func(x, _, _ float32) float32 {
		if x > 20 {
			return x
		}
		return float32(math.Log1p(math.Exp(float64(x))))
	},
	"clamp":      func(x, lo, hi float32) float32 { return min(max(x, lo), hi) },
	"add_scalar": func(x, v, _ float32) float32 { return x + v },
	"mul_scalar": func(x, v, _ float32) float32 { return x * v },
}

func TestUnaryGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	x := bf16s(r, 5000, 6)
	copy(x, []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0, 25, 20, -0.5})
	dx := up(t, e, x)
	for op, ref := range unaryRef {
		for _, round := range []bool{true, false} {
			const p0, p1 = -1.5, 3.25
			want := make([]float32, len(x))
			for i, v := range x {
				want[i] = ref(v, p0, p1)
				if round {
					want[i] = numfmt.BF16Round(want[i])
				}
			}
			out := alloc(t, e, 4*len(x))
			if err := e.k.Unary(e.s, op, out, dx, len(x), op, p0, p1, round); err != nil {
				t.Fatal(err)
			}
			exact(t, fmt.Sprintf("%s bf16 %v", op, round), down[float32](t, e, out, len(x)), want)
		}
	}
}

func TestBinaryGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	as, bs := []int{2, 3, 1, 64}, []int{3, 5, 1}
	a, b := bf16s(r, 2*3*64, 2), bf16s(r, 3*5, 2)
	b[4] = 0
	da, db := up(t, e, a), up(t, e, b)
	ref := map[string]func(x, y []float32, out []float32){
		"add": func(x, y, o []float32) { kernels.Add(o, x, as, y, bs) },
		"sub": func(x, y, o []float32) {
			ny := make([]float32, len(y))
			for i, v := range y {
				ny[i] = -v
			}
			kernels.Add(o, x, as, ny, bs) // x - y = x + (-y) exactly
		},
		"mul": func(x, y, o []float32) { kernels.Mul(o, x, as, y, bs) },
		"div": func(x, y, o []float32) { kernels.Div(o, x, as, y, bs) },
	}
	for op, f := range ref {
		want := make([]float32, 2*3*5*64)
		f(a, b, want)
		numfmt.BF16RoundSlice(want)
		out := alloc(t, e, 4*len(want))
		shape, err := e.k.Binary(e.s, op, out, da, as, db, bs, op, true)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(shape) != "[2 3 5 64]" {
			t.Fatalf("%s: broadcast shape %v", op, shape)
		}
		exact(t, op, down[float32](t, e, out, len(want)), want)
	}
}

func TestCopyStridedGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	const B, S, D = 4, 10, 64
	x := bf16s(r, B*S*D, 1)
	dx := up(t, e, x)
	// slice x[:, 2:7, :] and concatenate it after x along axis 1: out [B, 15, D]
	want := make([]float32, B*15*D)
	for b := range B {
		copy(want[b*15*D:], x[b*S*D:(b+1)*S*D])
		copy(want[(b*15+S)*D:], x[(b*S+2)*D:(b*S+7)*D])
	}
	out := alloc(t, e, 4*len(want))
	if err := e.k.CopyStrided(e.s, "concat 1", out, dx, 4, []int{B, S, D}, []int{S * D, D, 1}, []int{15 * D, D, 1}); err != nil {
		t.Fatal(err)
	}
	if err := e.k.CopyStrided(e.s, "concat 2", out+4*S*D, dx+4*2*D, 4, []int{B, 5, D}, []int{S * D, D, 1}, []int{15 * D, D, 1}); err != nil {
		t.Fatal(err)
	}
	exact(t, "slice + concat", down[float32](t, e, out, len(want)), want)
	// expand an int64 row [1, 7] to [3, 7] (stride 0)
	ids := []int64{5, -1, 1 << 40, 3, 2, 9, 7}
	wantI := append(append(append([]int64(nil), ids...), ids...), ids...)
	outI := alloc(t, e, 8*len(wantI))
	if err := e.k.CopyStrided(e.s, "expand", outI, up(t, e, ids), 8, []int{3, 7}, []int{0, 1}, []int{7, 1}); err != nil {
		t.Fatal(err)
	}
	if got := down[int64](t, e, outI, len(wantI)); fmt.Sprint(got) != fmt.Sprint(wantI) {
		t.Fatalf("expand: got %v, want %v", got, wantI)
	}
}

func TestReductionsGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	const rows, n = 5, 5120
	x := bf16s(r, rows*n, 3)
	dx := up(t, e, x)
	want := make([]float32, rows)
	kernels.MeanSquare(want, x, rows, n)
	numfmt.BF16RoundSlice(want)
	out := alloc(t, e, 4*rows)
	if err := e.k.MeanSq(e.s, "mean_sq", out, dx, rows, n, true); err != nil {
		t.Fatal(err)
	}
	exact(t, "mean_sq", down[float32](t, e, out, rows), want)

	for _, c := range []struct {
		shape []int
		axis  int
	}{{[]int{3, 7, 100}, 2}, {[]int{3, 16, 50}, 1}, {[]int{4, 5}, 0}} {
		v := bf16s(r, numel(c.shape), 1)
		os := append(append([]int(nil), c.shape[:c.axis]...), c.shape[c.axis+1:]...)
		want := make([]float32, numel(os))
		kernels.SumAxis(want, v, c.shape, c.axis)
		out := alloc(t, e, 4*len(want))
		if err := e.k.Sum(e.s, "sum", out, up(t, e, v), c.shape, c.axis, false); err != nil {
			t.Fatal(err)
		}
		exact(t, fmt.Sprintf("sum %v axis %d", c.shape, c.axis), down[float32](t, e, out, len(want)), want)
	}

	const srows, sn = 4, 384
	s := bf16s(r, srows*sn, 4)
	wantS := make([]float32, len(s))
	kernels.Softmax(wantS, s, srows, sn)
	numfmt.BF16RoundSlice(wantS)
	outS := alloc(t, e, 4*len(s))
	if err := e.k.Softmax(e.s, "softmax", outS, up(t, e, s), srows, sn, true); err != nil {
		t.Fatal(err)
	}
	exact(t, "softmax", down[float32](t, e, outS, len(s)), wantS)
}

func TestRoutingOpsGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	const rows, ex, k, dim = 5, 384, 6, 512
	x := make([]float32, rows*ex)
	for i := range x {
		x[i] = float32(r.IntN(40)) / 4 // ties
	}
	dx := up(t, e, x)
	// topk_idx: ops.go's stable sort, descending
	want := make([]int64, rows*k)
	for i := range rows {
		ord := make([]int, ex)
		for j := range ord {
			ord[j] = j
		}
		row := x[i*ex : (i+1)*ex]
		sort.SliceStable(ord, func(p, q int) bool { return row[ord[p]] > row[ord[q]] })
		for j := range k {
			want[i*k+j] = int64(ord[j])
		}
	}
	idx := alloc(t, e, 8*rows*k)
	if err := e.k.TopkIdx(e.s, "topk_idx", idx, dx, rows, ex, k); err != nil {
		t.Fatal(err)
	}
	if got := down[int64](t, e, idx, len(want)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("topk_idx: got %v, want %v", got, want)
	}
	// gather: the values at the chosen experts
	wantG := make([]float32, rows*k)
	for i := range wantG {
		wantG[i] = x[(i/k)*ex+int(want[i])]
	}
	g := alloc(t, e, 4*rows*k)
	if err := e.k.GatherRows(e.s, "gather", g, dx, rows, ex, idx, k); err != nil {
		t.Fatal(err)
	}
	exact(t, "gather", down[float32](t, e, g, len(wantG)), wantG)
	// moe_combine in ascending expert id
	y := bf16s(r, rows*k*dim, 1)
	wantC := make([]float32, rows*dim)
	for i := range rows {
		ord := []int{0, 1, 2, 3, 4, 5}
		sort.Slice(ord, func(p, q int) bool { return want[i*k+ord[p]] < want[i*k+ord[q]] })
		for _, j := range ord {
			for d := range dim {
				wantC[i*dim+d] += y[(i*k+j)*dim+d]
			}
		}
	}
	c := alloc(t, e, 4*len(wantC))
	if err := e.k.MoECombine(e.s, "moe_combine", c, up(t, e, y), idx, rows, k, dim); err != nil {
		t.Fatal(err)
	}
	exact(t, "moe_combine", down[float32](t, e, c, len(wantC)), wantC)
	// token_map with one id out of range
	m := []int64{7, 3, 99, -1, 12}
	ids := []int64{4, 0, 2, 9, 1}
	out, bad := alloc(t, e, 8*len(ids)), alloc(t, e, 4)
	if err := e.s.Memset(bad, 0, 4, "bad"); err != nil {
		t.Fatal(err)
	}
	if err := e.k.TokenMap(e.s, "token_map", out, up(t, e, m), len(m), up(t, e, ids), len(ids), bad); err != nil {
		t.Fatal(err)
	}
	if got := down[int64](t, e, out, len(ids)); fmt.Sprint(got) != "[12 7 99 -1 3]" {
		t.Errorf("token_map: got %v, want [12 7 99 -1 3]", got)
	}
	if b := down[int32](t, e, bad, 1)[0]; b != 4 {
		t.Errorf("token_map bad flag = %d, want 4", b)
	}
}
