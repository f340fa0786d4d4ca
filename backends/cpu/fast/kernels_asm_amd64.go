package fast

import (
	"golang.org/x/sys/cpu"
)

func detect() Level {
	switch {
	case cpu.X86.HasAVX512F && cpu.X86.HasFMA:
		return AVX512
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return AVX2
	}
	return Portable
}

var avx512Set = &kernelSet{
	level: AVX512, mr: 12, nr: 32,
	tile: func(ap, bp, c []float32, ldc, kc int) {
		_, _, _ = ap[kc*12-1], bp[kc*32-1], c[11*ldc+31]
		gemmAVX512(&ap[0], &bp[0], &c[0], ldc, kc)
	},
	dot: func(a, b []float32) float32 {
		n := len(a) &^ 15
		var s float32
		if n > 0 {
			_ = b[n-1]
			s = dotF32AVX512(&a[0], &b[0], n)
		}
		return s + dotGo(a[n:], b[n:len(a)])
	},
	dotFP8: func(a []float32, w, s []byte) (float32, bool) {
		if len(s) == 0 {
			return 0, false
		}
		nb := len(s)
		_, _ = a[nb*32-1], w[nb*32-1]
		r, nan := dotFP8AVX512(&a[0], &w[0], &s[0], nb)
		return r, nan != 0
	},
	dotFP4: func(a []float32, w, s []byte) float32 {
		if len(s) == 0 {
			return 0
		}
		nb := len(s)
		_, _ = a[nb*32-1], w[nb*16-1]
		return dotFP4AVX512(&a[0], &w[0], &s[0], nb, &lutE2M1[0])
	},
	fp4Group: 32,
}

var avx2Set = &kernelSet{
	level: AVX2, mr: 6, nr: 16,
	tile: func(ap, bp, c []float32, ldc, kc int) {
		_, _, _ = ap[kc*6-1], bp[kc*16-1], c[5*ldc+15]
		gemmAVX2(&ap[0], &bp[0], &c[0], ldc, kc)
	},
	dot: func(a, b []float32) float32 {
		n := len(a) &^ 7
		var s float32
		if n > 0 {
			_ = b[n-1]
			s = dotF32AVX2(&a[0], &b[0], n)
		}
		return s + dotGo(a[n:], b[n:len(a)])
	},
	dotFP8: func(a []float32, w, s []byte) (float32, bool) {
		if len(s) == 0 {
			return 0, false
		}
		nb := len(s)
		_, _ = a[nb*32-1], w[nb*32-1]
		r, nan := dotFP8AVX2(&a[0], &w[0], &s[0], nb)
		return r, nan != 0
	},
	dotFP4: func(a []float32, w, s []byte) float32 {
		if len(s) == 0 {
			return 0
		}
		nb := len(s)
		_, _ = a[nb*32-1], w[nb*16-1]
		return dotFP4AVX2(&a[0], &w[0], &s[0], nb, &lutE2M1[0])
	},
	fp4Group: 16,
}
