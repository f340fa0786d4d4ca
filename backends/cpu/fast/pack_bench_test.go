package fast

import (
	"math/rand/v2"
	"testing"
)

func benchPack(b *testing.B, kind wkind) {
	r := rand.New(rand.NewPCG(1, 1))
	const n, k, nr = 64, 2048, 16
	var w *weights
	if kind == kindFP4 {
		q, s := randFP4(r, n, k)
		w = &weights{kind: kindFP4, n: n, k: k, q: q, s: s, kb: k / 32}
	} else {
		q, s := randFP8(r, n, k)
		w = &weights{kind: kindFP8, n: n, k: k, q: q, s: s, kb: k / 32}
	}
	dst := make([]float32, k*nr)
	for b.Loop() {
		for j0 := 0; j0 < n; j0 += nr {
			packB(dst, w, j0, nr, nr)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n*k), "ns/elem")
}

func BenchmarkPackBFP4(b *testing.B) { benchPack(b, kindFP4) }
func BenchmarkPackBFP8(b *testing.B) { benchPack(b, kindFP8) }

// Small-m expert shapes: prefill path vs streaming path.
func BenchmarkFP4Expert12(b *testing.B) { benchFP4(b, 12, 2048, 1536) }
func BenchmarkFP4Expert4(b *testing.B)  { benchFP4(b, 4, 2048, 1536) }

func benchStream(b *testing.B, m int, stream bool) {
	r := rand.New(rand.NewPCG(1, 1))
	const k, n = 2048, 1536
	a := randActs(r, m, k)
	q, s := randFP4(r, n, k)
	w := &weights{kind: kindFP4, n: n, k: k, q: q, s: s, kb: k / 32}
	out := make([]float32, m*n)
	for b.Loop() {
		if stream {
			decode(current(), out, a, m, w, true)
		} else {
			prefill(current(), out, a, m, w, true)
		}
	}
}

func BenchmarkStream8(b *testing.B)   { benchStream(b, 8, true) }
func BenchmarkPrefill8(b *testing.B)  { benchStream(b, 8, false) }
func BenchmarkStream16(b *testing.B)  { benchStream(b, 16, true) }
func BenchmarkPrefill16(b *testing.B) { benchStream(b, 16, false) }
func BenchmarkPrefill32(b *testing.B) { benchStream(b, 32, false) }
func BenchmarkStream24(b *testing.B)  { benchStream(b, 24, true) }
func BenchmarkPrefill24(b *testing.B) { benchStream(b, 24, false) }
func BenchmarkStream32(b *testing.B)  { benchStream(b, 32, true) }
