package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/internal/numfmt"
)

// GPU tests of the tensor-core products (tc.go) against the reference
// products; the MMA sums each 32-wide block partial in its own order, so
// they hold to the golden tolerance, not to the bit.

func TestTCEligible(t *testing.T) {
	for _, c := range []struct {
		m, k, n int
		ok      bool
	}{
		{1024, 5120, 1280, true}, {8192, 1280, 32768, true}, {128, 128, 1, true},
		{127, 5120, 1280, false}, {1024, 5120 + 32, 1280, false}, {1024, 0, 1280, false}, {1024, 5120, 0, false},
	} {
		if got := tcEligible(c.m, c.k, c.n); got != c.ok {
			t.Errorf("tcEligible(%d, %d, %d) = %v, want %v", c.m, c.k, c.n, got, c.ok)
		}
	}
	if got, want := TCScratchBytes(3, 128), 3*128+3*4*4; got != want {
		t.Errorf("TCScratchBytes(3, 128) = %d, want %d", got, want)
	}
	// the shared memory the kernels are launched with fits one H200 block (227 KiB)
	for _, fp4 := range []bool{false, true} {
		if sh := tcShared(fp4); sh > 227<<10 || sh%16 != 0 {
			t.Errorf("tcShared(%v) = %d", fp4, sh)
		}
	}
}

// bytePerm is __byte_perm(x, y, s) (PRMT's default mode, selector bit 3
// clear as e2m1x4_to_e4m3x4 uses it).
func bytePerm(x, y, s uint32) uint32 {
	in := uint64(y)<<32 | uint64(x)
	var r uint32
	for i := range 4 {
		sel := (s >> (4 * i)) & 7
		r |= uint32(in>>(8*sel)&0xff) << (8 * i)
	}
	return r
}

// TestE2M1ToE4M3Widening replays gemm_tc.cuh's e2m1x4_to_e4m3x4 on every
// 16-bit input and checks each byte is the e4m3 code of the nibble's value.
func TestE2M1ToE4M3Widening(t *testing.T) {
	for p := uint32(0); p < 1<<16; p++ {
		mag := bytePerm(0x3c383000, 0x4c484440, p&0x7777)
		s := p & 0x8888
		got := mag | (s&0x8)<<4 | (s&0x80)<<8 | (s&0x800)<<12 | (s&0x8000)<<16
		for i := range 4 {
			nib := byte(p >> (4 * i) & 0xf)
			want := numfmt.E2M1ToF32(nib)
			if v := numfmt.E4M3ToF32(byte(got >> (8 * i))); v != want || math.Signbit(float64(v)) != math.Signbit(float64(want)) {
				t.Fatalf("input %#04x nibble %d (%#x): e4m3 %#02x = %g, want %g", p, i, nib, byte(got>>(8*i)), v, want)
			}
		}
	}
}

// tcCase runs one fp8 or fp4 product three ways on the GPU (from the
// fake-quantised activations through tc_quant_a, and from act_quant's own
// codes and scales) and compares with the reference.
func tcCase(t *testing.T, fp4, real bool, m, k, n int) {
	e := gpu(t)
	r := rng(t)
	x := bf16s(r, m*k, 1)
	codes, scales := make([]byte, m*k), make([]float32, m*k/32)
	a := append([]float32(nil), x...)
	numfmt.ActQuant(a, 32, codes, scales)
	want := make([]float32, m*n)
	var w, s []byte
	if fp4 {
		w, s = randBytes(r, n*k/2), e8m0s(r, n*(k/32))
		kernels.MatmulFP4(want, a, m, k, w, s, n)
	} else {
		if real {
			w, s = checkpointFP8(r, n, k)
		} else {
			w, s = e4m3Codes(r, n*k), e8m0s(r, ((n+31)/32)*(k/32))
		}
		kernels.MatmulFP8(want, a, m, k, w, s, n)
	}
	dw, ds := up(t, e, w), up(t, e, s)
	name := fmt.Sprintf("matmul_%s_tc %dx%dx%d", map[bool]string{false: "fp8", true: "fp4"}[fp4], m, k, n)
	if !fp4 {
		name += map[bool]string{false: " uniform codes", true: " checkpoint-like codes"}[real]
	}
	exactC := exactProduct(fp4, a, m, k, w, s, n)

	out := alloc(t, e, 4*m*n)
	scratch := alloc(t, e, TCScratchBytes(m, k))
	run := e.k.MatmulFP8TC
	if fp4 {
		run = e.k.MatmulFP4TC
	}
	if err := run(e.s, name, out, up(t, e, a), m, k, dw, ds, n, scratch); err != nil {
		t.Fatal(err)
	}
	got := down[float32](t, e, out, m*n)
	check := func(what string, got []float32) {
		t.Helper()
		if fp4 || real {
			// the MMA's block partials are added in another order than the
			// reference's chain: where an output cancels to far below its
			// terms it may be several of its own ulps off (as close to the
			// exact product as the reference is)
			if g, r := accuracy(t, name+what, got, want, exactC); g > 2*r+2 {
				t.Errorf("%s%s: %.2f bf16 ulps from the exact product, the reference %.2f", name, what, g, r)
			}
			reordered(t, name+what, got, want)
			return
		}
		// Uniform codes make outputs that cancel to a few ulps of their
		// terms: there the reference's own fp32 sums are tens of ulps from
		// the exact product, and the MMA's differ from them by as much. The
		// kernel must be as accurate as the reference, not equal to it.
		t.Logf("%s%s: %v", name, what, compare(got, want, 16))
		if g, r := accuracy(t, name+what, got, want, exactC); g > 2*r+2 {
			t.Errorf("%s%s: %.2f bf16 ulps from the exact product, the reference %.2f", name, what, g, r)
		}
	}
	check(" (from activations)", got)
	// tc_quant_a's codes times its scales give back the activations exactly
	qc, qs := down[byte](t, e, scratch, m*k), down[float32](t, e, scratch+driver.Ptr(m*k), m*k/32)
	for i := range a {
		if v := numfmt.E4M3ToF32(qc[i]) * qs[i/32]; v != a[i] {
			t.Fatalf("%s: tc_quant_a element %d: code %#02x · %g = %g, want %g", name, i, qc[i], qs[i/32], v, a[i])
		}
	}

	if !fp4 { // the wgmma kernels: measured and logged, not held to the tolerance (see Kernels.WGMMA)
		for _, kn := range []struct {
			name string
			sh   int
		}{{"matmul_fp8_wg", tcWGShared}, {"matmul_fp8_wh", tcWHShared}} {
			out3 := alloc(t, e, 4*m*n)
			if err := e.k.tcKernel(e.s, kn.name, kn.sh, name, out3, scratch, scratch+driver.Ptr(m*k), m, k, dw, ds, n); err != nil {
				t.Fatal(err)
			}
			got := down[float32](t, e, out3, m*n)
			fits, msg := reorderedFits(got, want)
			t.Logf("%s (%s): within the reordered tolerance %v: %s", name, kn.name, fits, msg)
			accuracy(t, name+" ("+kn.name+")", got, want, exactC)
		}
	}
	out2 := alloc(t, e, 4*m*n)
	codesFn := e.k.MatmulFP8TCCodes
	if fp4 {
		codesFn = e.k.MatmulFP4TCCodes
	}
	if err := codesFn(e.s, name, out2, up(t, e, codes), up(t, e, scales), m, k, dw, ds, n); err != nil {
		t.Fatal(err)
	}
	check(" (act_quant's codes)", down[float32](t, e, out2, m*n))
}

func TestMatmulFP8TCGPU(t *testing.T) {
	// wq_a at 1024 tokens; then rows and columns that are not multiples of
	// the 128×128 tile (n odd, a partial 32-column scale block), and K of one tile.
	for _, c := range []struct{ m, k, n int }{{1024, 5120, 1280}, {200, 256, 72}, {129, 1280, 131}, {300, 128, 33}, {257, 2304, 520}} {
		tcCase(t, false, true, c.m, c.k, c.n)
	}
	// codes drawn uniformly over every finite byte (the other kernel tests'
	// data): products over 2^35 apart in one block, outputs that cancel
	tcCase(t, false, false, 1024, 5120, 1280)
}

func TestMatmulFP4TCGPU(t *testing.T) {
	// the shared/routed expert shapes (dim 5120, moe_inter 2304) and odd tiles
	for _, c := range []struct{ m, k, n int }{{256, 5120, 2304}, {300, 2304, 520}, {130, 384, 77}, {128, 128, 1}} {
		tcCase(t, true, false, c.m, c.k, c.n)
	}
}

func TestMatmulTCBadK(t *testing.T) {
	e := gpu(t)
	if err := e.k.MatmulFP8TCCodes(e.s, "bad", 0, 0, 0, 256, 5120+32, 0, 0, 64); err == nil {
		t.Error("k = 5152 accepted")
	}
}

// checkpointFP8 returns fp8 weights [n,k] as a checkpoint stores them:
// normal values quantised per 32×32 block with the scale 2^ceil(log2(amax/448)).
func checkpointFP8(r *rand.Rand, n, k int) ([]byte, []byte) {
	nb, kb := (n+31)/32, k/32
	v := make([]float32, n*k)
	for i := range v {
		v[i] = float32(r.NormFloat64() * 0.02)
	}
	codes, scales := make([]byte, n*k), make([]byte, nb*kb)
	for bi := range nb {
		for bk := range kb {
			var amax float32
			for j := bi * 32; j < min(n, bi*32+32); j++ {
				for c := bk * 32; c < bk*32+32; c++ {
					amax = max(amax, float32(math.Abs(float64(v[j*k+c]))))
				}
			}
			e := int(math.Ceil(math.Log2(float64(amax) / 448)))
			scales[bi*kb+bk] = byte(e + 127)
			sc := float32(math.Ldexp(1, e))
			for j := bi * 32; j < min(n, bi*32+32); j++ {
				for c := bk * 32; c < bk*32+32; c++ {
					codes[j*k+c] = numfmt.F32ToE4M3(v[j*k+c] / sc)
				}
			}
		}
	}
	return codes, scales
}

// exactProduct is the block-scaled product in float64 (each block partial
// and the sum exact but for float64's rounding), to measure how far the
// reference and the tensor-core kernel each are from it.
func exactProduct(fp4 bool, a []float32, m, k int, w, s []byte, n int) []float64 {
	kb := k / 32
	out := make([]float64, m*n)
	var wg sync.WaitGroup
	for j0 := 0; j0 < n; j0 += 64 {
		wg.Add(1)
		go func(j0 int) {
			defer wg.Done()
			wf := make([]float64, k)
			for j := j0; j < min(n, j0+64); j++ {
				for c := range k {
					if fp4 {
						b := w[(j*k+c)/2]
						if c&1 == 1 {
							b >>= 4
						}
						wf[c] = float64(numfmt.E2M1ToF32(b&0xf)) * float64(numfmt.E8M0ToF32(s[j*kb+c/32]))
					} else {
						wf[c] = float64(numfmt.E4M3ToF32(w[j*k+c])) * float64(numfmt.E8M0ToF32(s[(j/32)*kb+c/32]))
					}
				}
				for i := range m {
					var acc float64
					for c, av := range a[i*k : (i+1)*k] {
						acc += float64(av) * wf[c]
					}
					out[i*n+j] = acc
				}
			}
		}(j0)
	}
	wg.Wait()
	return out
}

// accuracy logs the largest distance from the exact product, in bf16 ulps of
// the exact value, of the kernel's and the reference's outputs.
func accuracy(t *testing.T, name string, got, want []float32, exact []float64) (float64, float64) {
	t.Helper()
	var worstGot, worstRef float64
	for i, x := range exact {
		ulp := math.Ldexp(1, math.Ilogb(math.Max(math.Abs(x), 0x1p-126))-7)
		worstGot = math.Max(worstGot, math.Abs(float64(got[i])-x)/ulp)
		worstRef = math.Max(worstRef, math.Abs(float64(want[i])-x)/ulp)
	}
	t.Logf("%s: distance from the exact product, bf16 ulps: kernel %.2f, reference %.2f", name, worstGot, worstRef)
	return worstGot, worstRef
}

// TestMatmulTCGroupedGPU: rows grouped by expert (an empty group, groups
// shorter and longer than a tile, one with a bad id), each group's rows
// against the reference product with its expert's weights.
func TestMatmulTCGroupedGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	for _, fp4 := range []bool{true, false} {
		const experts, k, n = 6, 256, 200
		counts := []int{0, 1, 130, 255, 7, 3}
		ids := []int64{2, 5, 0, 2, 4, 9} // 9: out of range
		offs := []int32{0}
		for _, c := range counts {
			offs = append(offs, offs[len(offs)-1]+int32(c))
		}
		rows := int(offs[len(offs)-1])
		x := bf16s(r, rows*k, 1)
		codes, scales := make([]byte, rows*k), make([]float32, rows*k/32)
		numfmt.ActQuant(x, 32, codes, scales)
		wPer, sPer := n*k, ((n+31)/32)*(k/32)
		if fp4 {
			wPer, sPer = n*k/2, n*(k/32)
		}
		var w, s []byte
		if fp4 {
			w, s = randBytes(r, experts*wPer), e8m0s(r, experts*sPer)
		} else { // checkpoint-like: uniform codes cancel (see tcCase)
			for range experts {
				ew, es := checkpointFP8(r, n, k)
				w, s = append(w, ew...), append(s, es...)
			}
		}
		out := alloc(t, e, 4*rows*n)
		rt := Routed{FP4: fp4, W: up(t, e, w), Scale: up(t, e, s), WStride: wPer, ScaleStride: sPer, Experts: experts}
		if err := e.k.MatmulTCGrouped(e.s, "grouped", out, up(t, e, codes), up(t, e, scales), rows, k, rt, n, up(t, e, offs), up(t, e, ids), len(counts), 0, 1); err != nil {
			t.Fatal(err)
		}
		got := down[float32](t, e, out, rows*n)
		for q, c := range counts {
			lo := int(offs[q])
			g := got[lo*n : (lo+c)*n]
			if ids[q] >= experts {
				for i, v := range g {
					if v == v {
						t.Fatalf("fp4 %v group %d (bad id): element %d = %g, want NaN", fp4, q, i, v)
					}
				}
				continue
			}
			want := make([]float32, c*n)
			ew, es := w[int(ids[q])*wPer:][:wPer], s[int(ids[q])*sPer:][:sPer]
			if fp4 {
				kernels.MatmulFP4(want, x[lo*k:(lo+c)*k], c, k, ew, es, n)
			} else {
				kernels.MatmulFP8(want, x[lo*k:(lo+c)*k], c, k, ew, es, n)
			}
			golden(t, fmt.Sprintf("grouped fp4 %v group %d (%d rows, expert %d)", fp4, q, c, ids[q]), g, want)
		}
	}
}

// TestMatmulRoutedTCGPU: the routed products at prefill (RouteGroups, then
// one grouped tensor-core launch that reads and writes the rows in place)
// against the reference product of each row's expert, with experts chosen
// by no row, a bad id (a NaN row) and both input forms (a token's input
// for its k slots, an input a row); the grouping against a stable sort
// done here.
func TestMatmulRoutedTCGPU(t *testing.T) {
	e := gpu(t)
	r := rng(t)
	const tokens, topk, experts = 70, 3, 9
	for _, c := range []struct {
		fp4       bool
		k, n, div int
	}{{true, 512, 384, topk}, {true, 256, 200, 1}, {false, 256, 136, topk}} {
		rows := tokens * topk
		ids := make([]int64, rows)
		for tk := range tokens {
			for j, p := range r.Perm(experts - 2)[:topk] { // experts 7 and 8 stay empty
				ids[tk*topk+j] = int64(p)
			}
		}
		ids[5] = experts + 3 // out of range: that row is NaN
		a := quantActs(r, rows/c.div, c.k)
		kb := c.k / 32
		wPer, sPer := c.n*c.k/2, c.n*kb
		if !c.fp4 {
			wPer, sPer = c.n*c.k, ((c.n+31)/32)*kb
		}
		var w []byte
		if c.fp4 {
			w = randBytes(r, experts*wPer)
		} else {
			w = e4m3Codes(r, experts*wPer)
		}
		s := e8m0s(r, experts*sPer)
		want := make([]float32, rows*c.n)
		for q := range rows {
			ex := int(ids[q])
			if ex >= experts {
				for j := range c.n {
					want[q*c.n+j] = float32(math.NaN())
				}
				continue
			}
			ar := a[(q/c.div)*c.k : (q/c.div+1)*c.k]
			if c.fp4 {
				kernels.MatmulFP4(want[q*c.n:(q+1)*c.n], ar, 1, c.k, w[ex*wPer:(ex+1)*wPer], s[ex*sPer:(ex+1)*sPer], c.n)
			} else {
				kernels.MatmulFP8(want[q*c.n:(q+1)*c.n], ar, 1, c.k, w[ex*wPer:(ex+1)*wPer], s[ex*sPer:(ex+1)*sPer], c.n)
			}
		}
		if !e.k.routedTC(true, rows, c.div, c.k, c.n) {
			t.Fatalf("k %d n %d: not on the grouped tensor-core path", c.k, c.n)
		}
		scratch := alloc(t, e, routeScratchBytes(rows, experts))
		rg, err := e.k.RouteGroups(e.s, "groups", up(t, e, ids), rows, experts, scratch)
		if err != nil {
			t.Fatal(err)
		}
		// the grouping: expert by expert (the bad ids last), each in row order
		var perm []int32
		offs := []int32{0}
		for g := 0; g <= experts; g++ {
			for q, id := range ids {
				if (g < experts && id == int64(g)) || (g == experts && (id < 0 || id >= experts)) {
					perm = append(perm, int32(q))
				}
			}
			offs = append(offs, int32(len(perm)))
		}
		if got := down[int32](t, e, rg.perm, rows); fmt.Sprint(got) != fmt.Sprint(perm) {
			t.Fatalf("perm %v, want %v", got, perm)
		}
		if got := down[int32](t, e, rg.offs, experts+2); fmt.Sprint(got) != fmt.Sprint(offs) {
			t.Fatalf("offs %v, want %v", got, offs)
		}
		qs := alloc(t, e, TCScratchBytes(rows/c.div, c.k))
		codes, scales := qs, qs+driver.Ptr(rows/c.div*c.k)
		if err := e.k.TCQuantA(e.s, "codes", codes, scales, up(t, e, a), rows/c.div, c.k); err != nil {
			t.Fatal(err)
		}
		out := alloc(t, e, 4*len(want))
		rt := Routed{FP4: c.fp4, W: up(t, e, w), Scale: up(t, e, s), WStride: wPer, ScaleStride: sPer, Experts: experts}
		if err := e.k.MatmulRoutedTC(e.s, "routed tc", out, codes, scales, c.div, c.k, rt, c.n, rg, rows); err != nil {
			t.Fatal(err)
		}
		got := down[float32](t, e, out, len(want))
		reordered(t, fmt.Sprintf("matmul routed tc fp4 %v k %d n %d div %d", c.fp4, c.k, c.n, c.div), got, want)
	}
}
