package fast

import (
	"math"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestFP4QVNNISameAsAVX512 checks the pair kernels gemvFP4QVNNIx{2..8}
// against the one-row-a-register AVX-512 kernels and the AVX2 ones bit for
// bit, on rows laid out by pairFP4QRows: 1 to 19 activation rows in one
// call (pairs, an odd last row, more rows than one kernel takes), 1 to 33
// weight rows, 2 to 64 blocks, any scale byte, and packed words over the
// whole int16 range (the sums must stay exact for any input, not only for
// packFP4Q's) with random finite chunk factors.
func TestFP4QVNNISameAsAVX512(t *testing.T) {
	if !cpu.X86.HasAVX512BW || !cpu.X86.HasAVX512VL || !cpu.X86.HasAVX512VBMI || !cpu.X86.HasAVX512VNNI {
		t.Skip("the CPU lacks AVX-512 BW, VL, VBMI or VNNI")
	}
	r := rand.New(rand.NewPCG(18, 8))
	for _, sh := range []struct{ nb, rows int }{{64, 33}, {2, 1}, {4, 7}, {6, 32}, {48, 3}} {
		lda := fp4QRowBytes(sh.nb)
		w := make([]byte, sh.rows*sh.nb*16)
		for i := range w {
			w[i] = byte(r.IntN(256))
		}
		s := make([]byte, sh.rows*sh.nb)
		for i := range s {
			s[i] = byte(100 + r.IntN(50))
			if r.IntN(16) == 0 {
				s[i] = byte(r.IntN(256)) // 0 and 255 (NaN factor) included
			}
		}
		for m := 1; m <= 19; m++ {
			a := make([]byte, m*lda)
			for i := range m {
				row := a[i*lda : (i+1)*lda]
				switch i % 3 {
				case 0: // packFP4Q's rows of act_quant'd activations
					if !packFP4Q(row, randActs(r, 1, 32*sh.nb)) {
						t.Fatal("packFP4Q refused a row")
					}
				default: // any words, finite factors
					for c := 0; c < len(row); c += fp4QChunk {
						for j := 0; j < 128; j++ {
							row[c+j] = byte(r.IntN(256))
						}
						if i%3 == 2 { // the extremes
							for j := 0; j < 128; j += 2 {
								v := []int16{-32768, 32767, -32767, 0}[r.IntN(4)]
								row[c+j], row[c+j+1] = byte(v), byte(uint16(v)>>8)
							}
						}
						for q := range 8 {
							f := float32(math.Ldexp(1+r.Float64(), r.IntN(40)-30))
							b := math.Float32bits(f)
							for x := range 4 {
								row[c+128+4*q+x] = byte(b >> (8 * x))
							}
						}
					}
				}
			}
			pairs := make([]byte, len(a))
			vnni := &kernelSet{fp4QPairs: true}
			pairFP4QRows(vnni, pairs, lda, m, func(i int) []byte { return a[i*lda : (i+1)*lda] })
			want := make([]float32, m*sh.rows)
			got := make([]float32, m*sh.rows)
			ref := make([]float32, m*sh.rows)
			gemvFP4QAVX512(a, lda, m, w, s, sh.nb, sh.rows, want, sh.rows)
			gemvFP4QVNNI(pairs, lda, m, w, s, sh.nb, sh.rows, got, sh.rows)
			avx2Set.gemvFP4Q(a, lda, m, w, s, sh.nb, sh.rows, ref, sh.rows)
			for j := range want {
				g, v, x := math.Float32bits(got[j]), math.Float32bits(want[j]), math.Float32bits(ref[j])
				nan := got[j] != got[j] && want[j] != want[j] && ref[j] != ref[j]
				if (g != v || v != x) && !nan {
					t.Fatalf("nb=%d rows=%d m=%d: row %d col %d: VNNI %g, AVX-512 %g, AVX2 %g", sh.nb, sh.rows, m, j/sh.rows, j%sh.rows, got[j], want[j], ref[j])
				}
			}
		}
	}
}

// TestPairFP4QRows checks the pair layout byte for byte: every 32-byte part
// of a row's chunk lands beside the other row's, an odd last row as it is,
// and a kernel set without pairs copies the rows unchanged.
func TestPairFP4QRows(t *testing.T) {
	const nb, m = 6, 5
	lda := fp4QRowBytes(nb)
	src := make([]byte, m*lda)
	for i := range src {
		src[i] = byte(i*7 + i/251)
	}
	row := func(i int) []byte { return src[i*lda : (i+1)*lda] }
	dst := make([]byte, len(src))
	pairFP4QRows(&kernelSet{fp4QPairs: true}, dst, lda, m, row)
	for i := range m {
		for c := 0; c < nb/2; c++ {
			for part := range 5 {
				for b := range 32 {
					want := src[i*lda+c*fp4QChunk+32*part+b]
					at := i*lda + c*fp4QChunk + 32*part + b // the odd last row
					if i < m&^1 {
						at = (i&^1)*lda + 2*c*fp4QChunk + 64*part + 32*(i&1) + b
					}
					if dst[at] != want {
						t.Fatalf("row %d chunk %d part %d byte %d: at %d %d, want %d", i, c, part, b, at, dst[at], want)
					}
				}
			}
		}
	}
	pairFP4QRows(&kernelSet{}, dst, lda, m, row)
	for i := range src {
		if dst[i] != src[i] {
			t.Fatalf("without pairs: byte %d is %d, want %d", i, dst[i], src[i])
		}
	}
}

// BenchmarkFP4QKernels8 runs the 16-bit fp4 GEMV kernels of each level on
// 8 activation rows against 32 weight rows of K = 2048 (one decode task of
// an expert's prefill rows, operands in L1/L2), one thread: GFLOP/s of the
// kernel alone.
func BenchmarkFP4QKernels8(b *testing.B) {
	const m, rows, nb = 8, 32, 64
	r := rand.New(rand.NewPCG(18, 10))
	lda := fp4QRowBytes(nb)
	a := make([]byte, m*lda)
	for i := range m {
		packFP4Q(a[i*lda:(i+1)*lda], randActs(r, 1, 32*nb))
	}
	pairs := make([]byte, len(a))
	pairFP4QRows(&kernelSet{fp4QPairs: true}, pairs, lda, m, func(i int) []byte { return a[i*lda : (i+1)*lda] })
	w, s := randFP4(r, rows, 32*nb)
	out := make([]float32, m*rows)
	type kern struct {
		name string
		ok   bool
		f    func()
	}
	vbmi := cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VBMI
	for _, k := range []kern{
		{"avx2", cpu.X86.HasAVX2 && cpu.X86.HasFMA, func() { avx2Set.gemvFP4Q(a, lda, m, w, s, nb, rows, out, rows) }},
		{"avx512", vbmi, func() { gemvFP4QAVX512(a, lda, m, w, s, nb, rows, out, rows) }},
		{"vnni", vbmi && cpu.X86.HasAVX512VNNI, func() { gemvFP4QVNNI(pairs, lda, m, w, s, nb, rows, out, rows) }},
	} {
		b.Run(k.name, func(b *testing.B) {
			if !k.ok {
				b.Skip("the CPU lacks the kernel's features")
			}
			for b.Loop() {
				k.f()
			}
			b.ReportMetric(2*float64(m*rows*32*nb)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
