package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/backends/cpu/fast"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/internal/numfmt"
)

// GEMMFigure is the CPU GEMM kernel's own rate, measured in the same run
// as the prefill figures it is compared with: backends/cpu/fast's packed
// fp8 GEMM (fast.MatmulFP8) on random weights of a prefill-like shape of
// the benchmarked model, alone (no graph, no other op).
type GEMMFigure struct {
	Kernel string `json:"kernel"` // e.g. "fast.MatmulFP8 (packed GEMM), avx512"
	// Weight is the prefill graph's largest fp8 projection, whose K and N
	// the shape takes; WeightN is its N where N was cut (see gemmMaxFLOPs).
	Weight  string  `json:"weight,omitempty"`
	WeightN int     `json:"weight_n,omitempty"`
	M       int     `json:"m"` // rows: the longest prefill length, clamped to 16..1024
	K       int     `json:"k"`
	N       int     `json:"n"`
	Calls   int     `json:"calls"`   // timed calls (after one untimed)
	Seconds float64 `json:"seconds"` // the best call
	GFLOPS  float64 `json:"gflops"`  // 2·M·N·K / Seconds / 1e9
}

// GEMM shape bounds: rows between gemmMinRows (the streaming GEMV kernels
// take ≤ 4 rows) and gemmMaxRows (the kernel's rate no longer depends on
// M), N cut to whole 32-row scale groups so that one call is at most
// gemmMaxFLOPs (0.05-0.15 s on 2 cores) and the timing stays bounded.
const (
	gemmMinRows  = 16
	gemmMaxRows  = 1024
	gemmMaxFLOPs = 16e9
)

// isHost reports whether the model's primary backend keeps its values in
// host memory (cpu, cpu-ref, gorgonia): the CPU GEMM is its ceiling.
func isHost(m *engine.Model) bool {
	be, err := backends.Get(m.Placement.Primary)
	return err == nil && be.Capabilities().Host
}

// gemmShape picks the GEMM's shape: M from the prefill lengths, K and N of
// the prefill graph's largest fp8 projection (else its largest matmul
// weight, else 2048×2048).
func gemmShape(m *engine.Model, lens []int) (name string, M, K, N, fullN int) {
	M = gemmMaxRows
	if len(lens) > 0 {
		M = min(max(slices.Max(lens), gemmMinRows), gemmMaxRows)
	}
	K, N = 2048, 2048
	var best, bestFP8 int64
	for _, n := range m.Module.Graph("prefill").Nodes {
		switch n.Op {
		case "matmul_fp8", "matmul":
		default:
			continue
		}
		w := n.Args[1]
		if w.Op != "weight" || len(w.Type.Shape) != 2 || w.Type.Shape[0].Sym != "" || w.Type.Shape[1].Sym != "" || w.Type.Shape[0].N <= 0 || w.Type.Shape[1].N <= 0 {
			continue
		}
		size := w.Type.Shape[0].N * w.Type.Shape[1].N
		if n.Op == "matmul_fp8" && size > bestFP8 || bestFP8 == 0 && size > best {
			if n.Op == "matmul_fp8" {
				bestFP8 = size
			}
			best = size
			name, N, K = w.Attrs.Str("name", ""), int(w.Type.Shape[0].N), int(w.Type.Shape[1].N)
		}
	}
	fullN = N
	if limit := int(gemmMaxFLOPs / (2 * float64(M) * float64(K))); N > limit {
		N = max(limit/32*32, 32)
	}
	return name, M, K, N, fullN
}

// gemmBytes is the memory measureGEMM allocates for a shape (weights,
// scales, activations, output, the packed A panel and the B panels).
func gemmBytes(M, K, N int) int64 {
	m, k, n := int64(M), int64(K), int64(N)
	return n*k + (n/32+1)*(k/32+1) + 4*(2*m*k+m*n+n*k)
}

// measureGEMM times fast.MatmulFP8 at the current SIMD level for about
// budget seconds (one untimed call, then at least two timed ones) and
// returns the best call.
func measureGEMM(name string, M, K, N int, budget float64, seed uint64) GEMMFigure {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	a := make([]float32, M*K)
	for i := range a {
		a[i] = float32(r.NormFloat64()) * 3
	}
	for i := range M { // as the model feeds an fp8 Linear: act_quant'ed rows
		row := a[i*K : (i+1)*K]
		numfmt.ActQuantInplace(row[:K&^31], 32)
		numfmt.BF16RoundSlice(row[K&^31:])
	}
	w := make([]byte, N*K)
	for i := range w {
		w[i] = numfmt.F32ToE4M3(float32(r.NormFloat64() * 120))
	}
	s := make([]byte, (N+31)/32*((K+31)/32))
	for i := range s {
		s[i] = byte(115 + r.IntN(12)) // 2^-12..2^-1: the fused kernels' range
	}
	out := make([]float32, M*N)
	fig := GEMMFigure{Kernel: "fast.MatmulFP8 (packed GEMM), " + fast.CurrentLevel().String(), Weight: name, M: M, K: K, N: N}
	fast.MatmulFP8(out, a, M, K, w, s, N) // page faults, pools
	var spent float64
	for fig.Calls < 2 || spent < budget {
		t0 := time.Now()
		fast.MatmulFP8(out, a, M, K, w, s, N)
		d := time.Since(t0).Seconds()
		if fig.Calls == 0 || d < fig.Seconds {
			fig.Seconds = d
		}
		fig.Calls++
		spent += d
	}
	fig.GFLOPS = 2 * float64(M) * float64(K) * float64(N) / fig.Seconds / 1e9
	return fig
}

// gemmFigures measures the GEMM (host backends, with prefill lengths) and
// sets each prefill figure's fraction of it.
func gemmFigures(m *engine.Model, opt Options, rep *Report) {
	if opt.GEMMSeconds < 0 || len(opt.PrefillTokens) == 0 || !isHost(m) {
		return
	}
	name, M, K, N, fullN := gemmShape(m, opt.PrefillTokens)
	g := measureGEMM(name, M, K, N, opt.GEMMSeconds, opt.Seed)
	if fullN != N {
		g.WeightN = fullN
	}
	rep.GEMM = &g
	for i := range rep.Prefill {
		rep.Prefill[i].GEMMFraction = rep.Prefill[i].GFLOPS / g.GFLOPS
	}
	opt.Log("CPU GEMM %s %d×%d×%d: %.1f GFLOP/s (best of %d calls)", g.Kernel, M, K, N, g.GFLOPS, g.Calls)
}

// gemmPreflight checks the GEMM's buffers against the sessions' limit.
func gemmPreflight(m *engine.Model, opt Options) error {
	if opt.GEMMSeconds < 0 || len(opt.PrefillTokens) == 0 || !isHost(m) {
		return nil
	}
	_, M, K, N, _ := gemmShape(m, opt.PrefillTokens)
	need := gemmBytes(M, K, N)
	if limit, what := m.MemoryLimit(opt.MaxMemory); limit > 0 && need > limit {
		return fmt.Errorf("the CPU GEMM measurement (%d×%d×%d) needs %d bytes (%s), more than %s of %d bytes (%s)",
			M, K, N, need, engine.FormatBytes(need), what, limit, engine.FormatBytes(limit))
	}
	return nil
}
