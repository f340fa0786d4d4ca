package fast

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ds4go/ds4/internal/numfmt"
)

// cpuTime is the process's user + system time (the benchmarks report
// bytes per CPU second as well: on a shared machine the wall time moves
// with the other load, the CPU time much less).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopCPU runs fn b.N times and reports the weight bytes read per CPU
// second ("cpuGB/s": per core when the cores are busy throughout).
func loopCPU(b *testing.B, bytes int64, fn func()) {
	b.SetBytes(bytes)
	c0 := cpuTime()
	n := 0
	for b.Loop() {
		fn()
		n++
	}
	if c := cpuTime() - c0; c > 0 {
		b.ReportMetric(float64(bytes)*float64(n)/c.Seconds()/1e9, "cpuGB/s")
	}
}

// The decode kernels against the memory limit (issue 18): compare the GB/s
// of BenchmarkDecodeKernels with BenchmarkProbe of the same run.

// BenchmarkProbe is engine/bench.ProbeBandwidth's read: GOMAXPROCS
// goroutines summing their parts of a 1 GiB buffer (Dot of 64 KiB blocks
// with themselves); GB/s counts the bytes read.
func BenchmarkProbe(b *testing.B) {
	const n = 1 << 28 // float32s
	buf := make([]float32, n)
	p := runtime.GOMAXPROCS(0)
	chunk := (n + p - 1) / p
	run := func(fill bool) {
		var wg sync.WaitGroup
		for i := range p {
			wg.Go(func() {
				part := buf[min(i*chunk, n):min((i+1)*chunk, n)]
				if fill {
					for j := range part {
						part[j] = float32(j&7) * 0.125
					}
					return
				}
				var s float32
				for j := 0; j < len(part); j += 16384 {
					blk := part[j:min(j+16384, len(part))]
					s += Dot(blk, blk)
				}
				_ = s
			})
		}
		wg.Wait()
	}
	run(true)
	loopCPU(b, 4*n, func() { run(false) })
}

// BenchmarkDecodeKernels runs the decode products of the mini model from
// DRAM (a different weight matrix each call, 128-256 MiB in all) at 1, 4
// and 8 activation rows through the PerRow entry points (1 row: the
// one-row call): fp4 2048→8192 (as the routed experts' w1/w3), fp8
// 1024→8192 (wq_b), bf16 2048→32768 (the head). GB/s counts the weight
// bytes read.
func BenchmarkDecodeKernels(b *testing.B) {
	benchDecodeKernels(b, 32, 16, 8192, 32768)
}

// BenchmarkDecodeKernelsL2 is BenchmarkDecodeKernels on one matrix of
// 256 rows each (0.3-1 MB: from L2 at one thread), the kernels' compute
// speed without DRAM (run with -cpu 1 and take the best of several runs on
// a shared machine).
func BenchmarkDecodeKernelsL2(b *testing.B) {
	benchDecodeKernels(b, 1, 1, 256, 256)
}

func benchDecodeKernels(b *testing.B, M4, M8, N4, N16 int) {
	r := rand.New(rand.NewPCG(1, 1))
	type mat struct{ q, s []byte }
	const K4, K8, K16 = 2048, 1024, 2048
	N8 := N4
	fp4 := make([]mat, M4)
	for i := range fp4 {
		fp4[i].q, fp4[i].s = randFP4(r, N4, K4)
	}
	fp8 := make([]mat, M8)
	for i := range fp8 {
		fp8[i].q, fp8[i].s = randFP8(r, N8, K8)
	}
	// bf16 weights of a checkpoint's magnitudes: random bits put ~1/128
	// of them at exponent 0, and Intel cores take a microcode assist for
	// each denormal an FMA reads (the head ran at 2.7 GB/s with 4 rows)
	w16 := make([]byte, 2*N16*K16)
	for i := 0; i < len(w16); i += 2 {
		binary.LittleEndian.PutUint16(w16[i:], numfmt.BF16Bits(float32(r.NormFloat64()*0.02)))
	}
	for _, l := range levels(b) {
		if l == Portable {
			continue
		}
		prev := SetLevel(l)
		for _, m := range []int{1, 4, 8} {
			b.Run(fmt.Sprintf("%v/fp4/rows=%d", l, m), func(b *testing.B) {
				a := randActs(r, m, K4)
				out := make([]float32, m*N4)
				i := 0
				loopCPU(b, int64(len(fp4[0].q)+len(fp4[0].s)), func() {
					w := fp4[i%M4]
					MatmulFP4PerRow(out, a, m, K4, w.q, w.s, N4)
					i++
				})
			})
			b.Run(fmt.Sprintf("%v/fp8/rows=%d", l, m), func(b *testing.B) {
				a := randActs(r, m, K8)
				out := make([]float32, m*N8)
				i := 0
				loopCPU(b, int64(len(fp8[0].q)+len(fp8[0].s)), func() {
					w := fp8[i%M8]
					MatmulFP8PerRow(out, a, m, K8, w.q, w.s, N8)
					i++
				})
			})
			b.Run(fmt.Sprintf("%v/bf16/rows=%d", l, m), func(b *testing.B) {
				a := randActs(r, m, K16)
				out := make([]float32, m*N16)
				loopCPU(b, int64(len(w16)), func() { MatmulF32W16PerRow(out, a, w16, m, K16, N16) })
			})
		}
		SetLevel(prev)
	}
}

// BenchmarkFP8Stream is the one-row fp8 GEMV of wq_b's shape (1024 → 8192)
// on 128 different matrices, 1 GiB in all: each call streams its weights
// from DRAM whatever the machine's L3 (BenchmarkDecodeKernels' 16 matrices,
// 128 MiB, are partly served from the 480 MiB L3 some VMs report). The
// matrices are copies of one random 1 MiB block (their codes as randFP8
// draws them), so that making them takes no time.
func BenchmarkFP8Stream(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const K, N, mats = 1024, 8192, 128
	w0, s0 := randFP8(r, 1024, K)
	type mat struct{ q, s []byte }
	ms := make([]mat, mats)
	for m := range ms {
		ms[m].q = make([]byte, N*K)
		for i := 0; i < len(ms[m].q); i += len(w0) {
			copy(ms[m].q[i:], w0)
		}
		ms[m].s = make([]byte, N/32*K/32)
		for i := 0; i < len(ms[m].s); i += len(s0) {
			copy(ms[m].s[i:], s0)
		}
	}
	a := randActs(r, 1, K)
	out := make([]float32, N)
	for _, l := range levels(b) {
		if l == Portable {
			continue
		}
		b.Run(l.String(), func(b *testing.B) {
			defer SetLevel(SetLevel(l))
			i := 0
			loopCPU(b, int64(len(ms[0].q)+len(ms[0].s)), func() {
				m := ms[i%mats]
				MatmulFP8PerRow(out, a, 1, K, m.q, m.s, N)
				i++
			})
		})
	}
}
