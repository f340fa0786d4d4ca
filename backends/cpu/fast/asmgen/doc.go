// Command asmgen generates the amd64 assembly kernels of package fast with
// avo (github.com/mmcloughlin/avo). Run it through go generate in the fast
// package:
//
//	go run ./asmgen -out kernels_amd64.s -stubs kernels_amd64.go -pkg fast
//
// Kernels (all operate on float32, x86-64 ABI0 stubs):
//
//	gemm{AVX512,AVX2}(ap, bp, c *float32, ldc, kc int)
//	    C[i*ldc+j] += Σ_kk ap[kk*MR+i]·bp[kk*NR+j] for i < MR, j < NR
//	    (MR×NR = 12×32 for AVX-512, 6×16 for AVX2)
//	dotF32{AVX512,AVX2}(a, b *float32, n int) float32
//	    Σ a[i]·b[i] for n a multiple of the vector width
//	dotFP8{AVX512,AVX2}(a *float32, w, s *byte, nb int) (sum float32, nan uint32)
//	    nb 32-blocks of e4m3 codes w with e8m0 scale bytes s (one per block,
//	    each ≤ 134); nan ≠ 0 when a NaN code (0x7F/0xFF) was met
//	dotFP4{AVX512,AVX2}(a *float32, w, s *byte, nb int, tab *float32) float32
//	    nb 32-blocks of packed e2m1 (16 bytes each) with e8m0 scale bytes s
//	    (1..254); a is permuted so that each vector-pair of activations holds
//	    the even elements first, then the odd ones
//	gemvFP4AVX2x{1..4}, gemvFP8AVX2x{1..4}
//	    AVX2 GEMV of up to 4 activation rows against consecutive weight rows
//	    (one dequantisation per block for all rows)
//	dotBF16AVX2, pack{FP8,FP4,BF16}x8AVX2
//	    bf16 weights as stored; panel packing with 8×8 register transposes
//	lanes32AVX2, loraFP8x{8,16}AVX2, qkF64AVX2x{1,2,4}, axpy{2,4}F64AVX2
//	    independent outputs in vector lanes, each summed in the scalar
//	    reference order (bit-identical kernels of package kernels)
package main
