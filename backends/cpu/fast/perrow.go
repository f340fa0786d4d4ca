package fast

// Per-row variants. A matmul chooses its kernels by the number of rows:
// up to decodeMaxM rows the streaming (GEMV) kernels, which compute every
// row alike whatever the row count, and beyond it the packed GEMM, which
// sums in another order. A prefill's rows may take either; the rows of a
// decode step of a batch are tokens of independent sequences, and each must
// come out as it would in a call of its own (continuous batching: a
// sequence's answer does not depend on the others in the batch). The PerRow
// variants take the streaming kernels at every row count: each row's
// result is bit for bit the one-row call's.

// MatmulFP8PerRow is MatmulFP8 with every row computed as a one-row call computes it.
func MatmulFP8PerRow(out, a []float32, m, k int, w, wScale []byte, n int) {
	matmulFP8(out, a, m, k, w, wScale, n, rowsStream)
}

// MatmulFP4PerRow is MatmulFP4 with every row computed as a one-row call computes it.
func MatmulFP4PerRow(out, a []float32, m, k int, w, wScale []byte, n int) {
	matmulFP4(out, a, m, k, w, wScale, n, rowsStream)
}

// MatmulF32PerRow is MatmulF32 with every row computed as a one-row call computes it.
func MatmulF32PerRow(out, a, w []float32, m, k, n int) {
	matmulF32("MatmulF32", out, a, w, m, k, n, false, rowsStream)
}

// MatmulBF16PerRow is MatmulBF16 with every row computed as a one-row call computes it.
func MatmulBF16PerRow(out, a, w []float32, m, k, n int) {
	matmulF32("MatmulBF16", out, a, w, m, k, n, true, rowsStream)
}

// MatmulF32W16PerRow is MatmulF32W16 with every row computed as a one-row call computes it.
func MatmulF32W16PerRow(out, a []float32, w []byte, m, k, n int) {
	matmulW16("MatmulF32W16", out, a, w, m, k, n, false, rowsStream)
}

// MatmulBF16W16PerRow is MatmulBF16W16 with every row computed as a one-row call computes it.
func MatmulBF16W16PerRow(out, a []float32, w []byte, m, k, n int) {
	matmulW16("MatmulBF16W16", out, a, w, m, k, n, true, rowsStream)
}

// GroupedLoRAPerRow is GroupedLoRA with every row computed as a one-row
// call computes it.
func GroupedLoRAPerRow(out, o []float32, m, groups, dg int, woA []float32, codes, scales []byte, rank int) {
	groupedLoRARows(out, o, m, groups, dg, woA, codes, scales, rank, rowsStream)
}

// ExpertMatmulPerRow is ExpertMatmul with every token computed as a
// one-token call computes it (each expert's rows streamed, however many).
func ExpertMatmulPerRow(out, x []float32, N, k, K, O int, perSlot bool, idx []int64, expert func(e int) (Expert, bool)) error {
	return expertMatmulRows(out, x, N, k, K, O, perSlot, idx, expert, true)
}
