package fast

import "github.com/ds4go/ds4/internal/numfmt"

// kernelSet is the set of inner kernels of one level.
type kernelSet struct {
	level  Level
	mr, nr int
	// tile: C[i*ldc+j] += Σ_kk ap[kk*mr+i]·bp[kk*nr+j], i < mr, j < nr.
	tile func(ap, bp, c []float32, ldc, kc int)
	// dot returns Σ a[i]·b[i] (any length).
	dot func(a, b []float32) float32
	// dotFP8 returns Σ_b e8m0(s[b])·Σ a·e4m3(w) over len(s) full 32-blocks
	// and whether a NaN code was met; requires every s[b] ≤ maxFP8Scale.
	dotFP8 func(a []float32, w, s []byte) (float32, bool)
	// dotFP4 is dotFP8 for packed e2m1 (16 bytes per block); a is permuted
	// with group fp4Group; requires 1 ≤ s[b] ≤ 254.
	dotFP4   func(a []float32, w, s []byte) float32
	fp4Group int
}

// maxFP8Scale is the largest e8m0 byte the fused fp8 kernels accept (the
// folded factor 2^(e−7) must stay finite).
const maxFP8Scale = 134

var (
	lutE4M3 [256]float32
	lutE2M1 [16]float32
	lutE8M0 [256]float32
)

func init() {
	for i := range 256 {
		lutE4M3[i] = numfmt.E4M3ToF32(byte(i))
		lutE8M0[i] = numfmt.E8M0ToF32(byte(i))
	}
	for i := range 16 {
		lutE2M1[i] = numfmt.E2M1ToF32(byte(i))
	}
}

var portable = &kernelSet{
	level: Portable, mr: 4, nr: 8,
	tile:     tileGo,
	dot:      dotGo,
	dotFP8:   dotFP8Go,
	dotFP4:   dotFP4Go,
	fp4Group: 2,
}

func current() *kernelSet {
	switch CurrentLevel() {
	case AVX512:
		return avx512Set
	case AVX2:
		return avx2Set
	}
	return portable
}

func tileGo(ap, bp, c []float32, ldc, kc int) {
	const mr, nr = 4, 8
	var acc [mr][nr]float32
	ap, bp = ap[:kc*mr], bp[:kc*nr]
	for kk := range kc {
		a := ap[kk*mr : kk*mr+mr : kk*mr+mr]
		b := bp[kk*nr : kk*nr+nr : kk*nr+nr]
		for i := range mr {
			ai := a[i]
			r := &acc[i]
			for j := range nr {
				r[j] += ai * b[j]
			}
		}
	}
	for i := range mr {
		row := c[i*ldc : i*ldc+nr]
		for j := range nr {
			row[j] += acc[i][j]
		}
	}
}

func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotFP8Go(a []float32, w, s []byte) (float32, bool) {
	var acc float32
	for bi, e := range s {
		aa := a[bi*block : bi*block+block]
		ww := w[bi*block : bi*block+block]
		var p0, p1 float32
		for c := 0; c < block; c += 2 {
			p0 += aa[c] * lutE4M3[ww[c]]
			p1 += aa[c+1] * lutE4M3[ww[c+1]]
		}
		acc += (p0 + p1) * lutE8M0[e]
	}
	return acc, false
}

func dotFP4Go(a []float32, w, s []byte) float32 {
	var acc float32
	for bi, e := range s {
		aa := a[bi*block : bi*block+block]
		ww := w[bi*block/2 : bi*block/2+block/2]
		var p0, p1 float32
		for j, b := range ww {
			p0 += aa[2*j] * lutE2M1[b&15]
			p1 += aa[2*j+1] * lutE2M1[b>>4]
		}
		acc += (p0 + p1) * lutE8M0[e]
	}
	return acc
}

// permuteFP4 writes a (length multiple of g) into dst so that each group of g
// elements lists its even elements, then its odd ones.
func permuteFP4(dst, a []float32, g int) {
	h := g / 2
	for base := 0; base+g <= len(a); base += g {
		src := a[base : base+g]
		d := dst[base : base+g]
		for j := range h {
			d[j] = src[2*j]
			d[h+j] = src[2*j+1]
		}
	}
}
