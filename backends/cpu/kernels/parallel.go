package kernels

import (
	"github.com/ds4go/ds4/backends/cpu/workpool"
)

// Threading: the kernels split their work over independent output rows,
// heads or columns. Every output element is still computed by exactly the
// same sequence of fp32/fp64 operations as the single-threaded loop, so the
// results do not depend on the number of threads.

// minParallelWork is the least work (in multiply-adds or element visits)
// worth handing to another goroutine.
const minParallelWork = 1 << 15

// parallelRange splits [0, n) into chunks of at least grain items and runs
// fn(lo, hi) on up to GOMAXPROCS goroutines (the caller's included) pulling
// chunks from a shared counter. work is the total cost estimate; below
// minParallelWork, with one CPU or where workpool.Run would not fork
// (workpool.Width), fn(0, n) runs on the caller.
func parallelRange(n, grain int, work int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if work < minParallelWork || n == 1 {
		fn(0, n)
		return
	}
	p := workpool.Width()
	if p <= 1 {
		fn(0, n)
		return
	}
	grain = max(grain, 1)
	// About 4 chunks per goroutine for balance, none smaller than grain.
	size := max(grain, (n+4*p-1)/(4*p))
	chunks := (n + size - 1) / size
	if chunks == 1 {
		fn(0, n)
		return
	}
	workpool.Run(chunks, func(c int) { fn(c*size, min(n, (c+1)*size)) })
}

// gemmDot4 returns gemmDot(a, w0) … gemmDot(a, w3), computed together for
// instruction-level parallelism: each sum is the same fp32 sequence as
// gemmDot's (products rounded to fp32, added in ascending c).
func gemmDot4(a, w0, w1, w2, w3 []float32) (s0, s1, s2, s3 float32) {
	n := len(a)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	for c, x := range a {
		s0 += float32(x * w0[c])
		s1 += float32(x * w1[c])
		s2 += float32(x * w2[c])
		s3 += float32(x * w3[c])
	}
	return
}

// gemmDot2x4 is gemmDot4 for two activation rows a and b at once.
func gemmDot2x4(a, b, w0, w1, w2, w3 []float32) (r [8]float32) {
	n := len(a)
	b, w0, w1, w2, w3 = b[:n], w0[:n], w1[:n], w2[:n], w3[:n]
	var s0, s1, s2, s3, t0, t1, t2, t3 float32
	for c, x := range a {
		y := b[c]
		v0, v1, v2, v3 := w0[c], w1[c], w2[c], w3[c]
		s0 += float32(x * v0)
		s1 += float32(x * v1)
		s2 += float32(x * v2)
		s3 += float32(x * v3)
		t0 += float32(y * v0)
		t1 += float32(y * v1)
		t2 += float32(y * v2)
		t3 += float32(y * v3)
	}
	return [8]float32{s0, s1, s2, s3, t0, t1, t2, t3}
}

// ParallelChunks runs fn over [0, n) in chunks of whole units (n a multiple
// of unit; at least 16,384 elements a chunk) with parallelRange's policy:
// the CPU backend's elementwise ops split large tensors this way.
func ParallelChunks(n, unit int, fn func(lo, hi int)) {
	unit = max(unit, 1)
	parallelRange(n/unit, max(1, 16384/unit), n, func(lo, hi int) { fn(lo*unit, hi*unit) })
}
