package fast

//go:generate go run ./asmgen -out kernels_amd64.s -stubs kernels_amd64.go -pkg fast

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/ds4go/ds4/backends/cpu/workpool"
)

// Level is an instruction-set level of the kernels.
type Level int

// The kernel levels, from the portable Go code to AVX-512.
const (
	Portable Level = iota // pure Go
	AVX2                  // AVX2 + FMA
	AVX512                // AVX-512F
)

func (l Level) String() string {
	switch l {
	case Portable:
		return "portable"
	case AVX2:
		return "avx2"
	case AVX512:
		return "avx512"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

var (
	level    atomic.Int32
	maxLevel Level
)

func init() {
	maxLevel = detect()
	level.Store(int32(maxLevel))
}

// MaxLevel returns the best level this CPU supports.
func MaxLevel() Level { return maxLevel }

// CurrentLevel returns the level in use.
func CurrentLevel() Level { return Level(level.Load()) }

// Supported reports whether the CPU can run level l.
func Supported(l Level) bool { return l >= Portable && l <= maxLevel }

// Unsupported returns why the CPU cannot run level l (the missing CPU
// features), or "" when it can. Tests name it when they skip a level.
func Unsupported(l Level) string {
	switch {
	case l < Portable || l > AVX512:
		return fmt.Sprintf("no such level %d", int(l))
	case Supported(l):
		return ""
	}
	return unsupported(l)
}

// SetLevel selects the kernels (clamped to MaxLevel) and returns the
// previous level.
func SetLevel(l Level) Level {
	if l > maxLevel {
		l = maxLevel
	}
	if l < Portable {
		l = Portable
	}
	return Level(level.Swap(int32(l)))
}

// decodeMaxM is the largest m that takes the streaming (GEMV) path.
const decodeMaxM = 4

// block is the quantisation block along K (and N for fp8 scales).
const block = 32

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func check(op string, lens ...int) {
	for i := 0; i+1 < len(lens); i += 2 {
		if lens[i] < lens[i+1] {
			panic(fmt.Sprintf("fast.%s: operand %d has %d elements, want %d", op, i/2, lens[i], lens[i+1]))
		}
	}
}

// parallel runs fn(i) for i in [0, n) on up to GOMAXPROCS goroutines (the
// caller's included; workpool.Run).
func parallel(n int, fn func(i int)) { workpool.Run(n, fn) }

// bufPool recycles the f32 scratch buffers (packed panels, permuted
// activations) of more than 1<<maxClass elements; smaller ones are kept by
// size class (classPools[c]: capacity at least 1<<c), so that the many small
// buffers of different sizes a decode step asks for are reused instead of
// replacing each other in one pool (a buffer too small for a request was
// dropped and a new one made).
var (
	bufPool    sync.Pool
	classPools [maxClass + 1]sync.Pool
)

// maxClass is the largest size class: 1<<20 floats (4 MiB); above it
// buffers are not rounded up.
const maxClass = 20

func getBuf(n int) *[]float32 {
	if n <= 1<<maxClass {
		c := bits.Len(uint(max(n, 1) - 1)) // 1<<c ≥ n
		if p, ok := classPools[c].Get().(*[]float32); ok {
			*p = (*p)[:n]
			return p
		}
		b := make([]float32, n, 1<<c)
		return &b
	}
	if p, ok := bufPool.Get().(*[]float32); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	b := make([]float32, n)
	return &b
}

func putBuf(p *[]float32) {
	if c := cap(*p); c > 0 && c <= 1<<maxClass {
		classPools[bits.Len(uint(c))-1].Put(p) // 1<<class ≤ c
		return
	}
	bufPool.Put(p)
}

// Dot returns Σ a[i]·b[i] over len(a) elements with the vector kernel of the
// current level (summation order unspecified). It is exported for streaming
// probes such as the memory-bandwidth probe of engine/bench.
func Dot(a, b []float32) float32 {
	check("Dot", len(b), len(a))
	return current().dot(a, b)
}
