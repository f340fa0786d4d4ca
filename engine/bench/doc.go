// Package bench measures a model on a backend (issue 5, "Fast CPU
// backend"): prefill throughput for a few prompt lengths with the FLOPs of
// the graph's matmul-like nodes, decode throughput with the bytes of
// weights one decoded token reads, a memory bandwidth probe to compare them
// with, the CPU GEMM kernel alone on a prefill shape of the model (host
// backends) to compare the prefill with, and the resident memory.
// cmd/exec's bench command prints its report:
//
//	rep, err := bench.Run(model, bench.Options{PrefillTokens: []int{1, 128}})
//	if err == nil {
//		fmt.Print(rep.Text())
//	}
package bench
