// Package kernels holds the CPU reference kernels: plain loops over float32
// slices (bf16 values stored exactly in float32), fp8/fp4 codes and e8m0
// scales, each documented with the reference's rounding points. They define
// the semantics of the ops; faster kernels and other backends are tested
// against them.
//
//	out := make([]float32, m*n)
//	kernels.MatmulFP8(out, activations, m, k, codes, scales, n)
package kernels
