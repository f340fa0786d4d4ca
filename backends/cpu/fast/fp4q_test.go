package fast

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

func BenchmarkPackFP4Q(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	a := randActs(r, 1, 2048)
	dst := make([]byte, fp4QRowBytes(64))
	b.SetBytes(4 * 2048)
	pack := packFP4Q
	if ks := current(); ks.packFP4Q != nil {
		pack = ks.packFP4Q
	}
	for b.Loop() {
		pack(dst, a)
	}
}

// TestPackFP4Q checks the vector packing against packFP4Q byte for byte,
// and the kernel's accept/reject decision, on quantised and raw rows with
// zero blocks, ties, Inf, NaN, tiny and huge blocks.
func TestPackFP4Q(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rows := map[string][]float32{}
	rows["quantised"] = randActs(r, 1, 256)
	raw := make([]float32, 256)
	for i := range raw {
		raw[i] = float32(r.NormFloat64()) * float32(math.Ldexp(1, r.IntN(40)-20))
	}
	rows["raw"] = raw
	z := append([]float32(nil), raw...)
	clear(z[32:64])
	z[70] = float32(math.Copysign(0, -1))
	rows["zero block"] = z
	ties := make([]float32, 64)
	for i := range ties {
		ties[i] = float32(i-32) + 0.5 // x·2^k: tie values at the scale 2^k = 2^9
	}
	ties[0] = 63.99
	rows["ties"] = ties
	huge := append([]float32(nil), raw[:64]...)
	huge[3] = math.MaxFloat32
	rows["huge"] = huge
	for name, bad := range map[string]float32{"inf": float32(math.Inf(-1)), "nan": float32(math.NaN()), "tiny": 1e-32} {
		b := append([]float32(nil), raw[:128]...)
		if name == "tiny" {
			clear(b[64:96])
		}
		b[70] = bad
		rows[name] = b
	}
	rows["smallest accepted"] = append(make([]float32, 63), float32(math.Ldexp(1, -103)))
	for _, l := range levels(t) {
		var ks *kernelSet
		withLevel(l, func() { ks = current() })
		if ks.packFP4Q == nil {
			continue
		}
		for name, a := range rows {
			want := make([]byte, fp4QRowBytes(len(a)/32))
			got := make([]byte, len(want))
			wok := packFP4Q(want, a)
			gok := ks.packFP4Q(got, a)
			if wok != gok {
				t.Fatalf("%v %s: ok = %v, want %v", l, name, gok, wok)
			}
			if wok && !bytes.Equal(got, want) {
				t.Fatalf("%v %s: packed bytes differ", l, name)
			}
		}
	}
	if !packFP4Q(make([]byte, 160), rows["smallest accepted"]) || packFP4Q(make([]byte, 160), rows["tiny"][64:128]) {
		t.Fatal("packFP4Q: wrong range of accepted maxima")
	}
}

// TestMatmulFP4RawActivations bounds the 16-bit activation path on
// activations that act_quant has not rounded (the model never feeds such to
// an fp4 Linear): each element is off by at most 2^-15 of its block's
// largest magnitude (half the integer grid's step), so a row's result by
// Σ_blocks amax·2^-15·Σ|w| on top of the fp32 rounding.
func TestMatmulFP4RawActivations(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const m, k, n = 5, 512, 96
	a := make([]float32, m*k)
	for i := range a {
		a[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(16)-8))
	}
	w, s := randFP4(r, n, k)
	d := dequantFP4(w, s, n, k)
	for _, l := range levels(t) {
		got := make([]float32, m*n)
		withLevel(l, func() { MatmulFP4(got, a, m, k, w, s, n) })
		for i := range m {
			for j := range n {
				var exact, mag, bound float64
				for b := 0; b < k; b += 32 {
					var amax, wsum float64
					for c := b; c < b+32; c++ {
						x, y := float64(a[i*k+c]), float64(d[j*k+c])
						exact += x * y
						mag += math.Abs(x * y)
						amax, wsum = math.Max(amax, math.Abs(x)), wsum+math.Abs(y)
					}
					bound += amax * math.Ldexp(1, -15) * wsum
				}
				// the result is rounded to bf16 (2^-8 relative) at the end
				tol := bound + 1e-6*mag + math.Abs(exact)*math.Ldexp(1, -8)
				if diff := math.Abs(float64(got[i*n+j]) - exact); diff > tol {
					t.Fatalf("%v [%d,%d] = %v, exact %v: off by %.3g > %.3g", l, i, j, got[i*n+j], exact, diff, tol)
				}
			}
		}
	}
}
