package fast

// Packed variants: the opposite of the PerRow ones. They take the packed
// GEMM at every row count (but where the streaming kernels serve every
// count alike: fp4 with the 16-bit activation kernels), so that each row's
// result is the one a call of many rows gives. A prompt prefilled in
// chunks (engine.Session.Prefill) runs its chunk calls on them: a short
// chunk then computes its rows as the one long prefill call would, and the
// chunked prefill keeps its bits.

// MatmulFP8Packed is MatmulFP8 with every row computed as a call of many rows computes it.
func MatmulFP8Packed(out, a []float32, m, k int, w, wScale []byte, n int) {
	matmulFP8(out, a, m, k, w, wScale, n, rowsPacked)
}

// MatmulFP4Packed is MatmulFP4 with every row computed as a call of many rows computes it.
func MatmulFP4Packed(out, a []float32, m, k int, w, wScale []byte, n int) {
	matmulFP4(out, a, m, k, w, wScale, n, rowsPacked)
}

// MatmulF32Packed is MatmulF32 with every row computed as a call of many rows computes it.
func MatmulF32Packed(out, a, w []float32, m, k, n int) {
	matmulF32("MatmulF32", out, a, w, m, k, n, false, rowsPacked)
}

// MatmulBF16Packed is MatmulBF16 with every row computed as a call of many rows computes it.
func MatmulBF16Packed(out, a, w []float32, m, k, n int) {
	matmulF32("MatmulBF16", out, a, w, m, k, n, true, rowsPacked)
}

// MatmulF32W16Packed is MatmulF32W16 with every row computed as a call of many rows computes it.
func MatmulF32W16Packed(out, a []float32, w []byte, m, k, n int) {
	matmulW16("MatmulF32W16", out, a, w, m, k, n, false, rowsPacked)
}

// MatmulBF16W16Packed is MatmulBF16W16 with every row computed as a call of many rows computes it.
func MatmulBF16W16Packed(out, a []float32, w []byte, m, k, n int) {
	matmulW16("MatmulBF16W16", out, a, w, m, k, n, true, rowsPacked)
}

// GroupedLoRAPacked is GroupedLoRA with every row computed as a call of
// many rows computes it.
func GroupedLoRAPacked(out, o []float32, m, groups, dg int, woA []float32, codes, scales []byte, rank int) {
	groupedLoRARows(out, o, m, groups, dg, woA, codes, scales, rank, rowsPacked)
}
