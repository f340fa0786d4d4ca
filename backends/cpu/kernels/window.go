package kernels

// Sliding-window attention bookkeeping (spec §4.5 step 3, §5): the per-layer
// ring buffer window_kv_cache [B, window, D] with slot = position mod window,
// and the window index lists handed to SparseAttn.

// WindowIdxPrefill returns the window index list of a prefill call
// (start_pos = 0) of s tokens: an int32 matrix [s, w] with w = min(s, window).
// Row t lists the chunk rows max(0, t−window+1) + j for j = 0..w−1, with every
// entry greater than t replaced by -1. The padding therefore sits at the END
// of the row while the chunk is shorter than the window: for window 8,
// t = 2 gives [0 1 2 -1 -1 -1 -1 -1] and t = 9 gives [2 3 4 5 6 7 8 9]
// (reference get_window_topk_idxs, start_pos == 0). The indices address the
// chunk's own KV rows (the window part of the concatenated KV). The same row
// serves every batch element.
func WindowIdxPrefill(s, window int) []int32 {
	w := min(s, window)
	out := make([]int32, s*w)
	for t := 0; t < s; t++ {
		start := max(0, t-window+1)
		for j := 0; j < w; j++ {
			v := start + j
			if v > t {
				v = -1
			}
			out[t*w+j] = int32(v)
		}
	}
	return out
}

// WindowIdxDecode returns the window index list [window] of a decode step at
// position startPos (> 0): the ring slots oldest first,
// (p mod W)+1, …, W−1, 0, …, p mod W with p = startPos, W = window, and every
// slot index greater than startPos replaced by -1 (ring still filling). The
// indices address rows of the ring buffer (the window part of the
// concatenated KV, whose length is always W in decode).
func WindowIdxDecode(startPos, window int) []int32 {
	out := make([]int32, window)
	oldest := startPos%window + 1
	for j := 0; j < window; j++ {
		v := (oldest + j) % window
		if v > startPos {
			v = -1
		}
		out[j] = int32(v)
	}
	return out
}

// WindowIdxChunk returns the window index list [s, window] of a chunk call
// of s tokens at startPos ≥ 0 over the concatenated window KV
// [ring (window rows, as before this call) ; the chunk's s rows]. Row t
// (position p = startPos+t) lists positions max(0, p−window+1) .. p in
// ascending order, position q at ring slot q mod window when q < startPos
// and at row window+(q−startPos) otherwise, padded with -1 at the END: the
// layout of WindowIdxPrefill for a prompt of at least window tokens, so that
// the attention's blocks of index entries match an unchunked prefill's.
func WindowIdxChunk(startPos, s, window int) []int32 {
	out := make([]int32, s*window)
	for t := 0; t < s; t++ {
		p := startPos + t
		o := out[t*window : (t+1)*window]
		j := 0
		for q := max(0, p-window+1); q <= p; q++ {
			if q < startPos {
				o[j] = int32(q % window)
			} else {
				o[j] = int32(window + q - startPos)
			}
			j++
		}
		for ; j < window; j++ {
			o[j] = -1
		}
	}
	return out
}

// WindowWriteChunk writes the rows kv [b, s, d] of positions startPos ..
// startPos+s−1 into ring [≥b, window, d] at slot = position mod window,
// only the last min(s, window) of them (an earlier one would be
// overwritten). At startPos 0 it is WindowWritePrefill, for s = 1
// WindowWriteDecode.
func WindowWriteChunk(ring []float32, b, window, d int, kv []float32, s, startPos int) {
	for bi := 0; bi < b; bi++ {
		for t := max(0, s-window); t < s; t++ {
			slot := (startPos + t) % window
			copy(ring[(bi*window+slot)*d:(bi*window+slot+1)*d], kv[(bi*s+t)*d:(bi*s+t+1)*d])
		}
	}
}

// WindowWritePrefill seeds the ring buffer ring [≥b, window, d] with the
// prefill chunk kv [b, s, d] (already normed, roped and fp8 fake-quantised):
// token t of the chunk goes to slot t mod window for the last min(s, window)
// tokens. For s ≤ window that is rows 0..s−1 (slots s..window−1 are left
// untouched); for s > window, with cutoff = s mod window, slots
// cutoff..window−1 get tokens s−window..s−window+(window−cutoff)−1 and slots
// 0..cutoff−1 get the last cutoff tokens.
func WindowWritePrefill(ring []float32, b, window, d int, kv []float32, s int) {
	for bi := 0; bi < b; bi++ {
		for t := max(0, s-window); t < s; t++ {
			slot := t % window
			copy(ring[(bi*window+slot)*d:(bi*window+slot+1)*d], kv[(bi*s+t)*d:(bi*s+t+1)*d])
		}
	}
}

// WindowWriteDecode writes the decode token kv [b, 1, d] into slot
// startPos mod window of ring [≥b, window, d].
func WindowWriteDecode(ring []float32, b, window, d int, kv []float32, startPos int) {
	slot := startPos % window
	for bi := 0; bi < b; bi++ {
		copy(ring[(bi*window+slot)*d:(bi*window+slot+1)*d], kv[bi*d:(bi+1)*d])
	}
}
