// Package fast holds the optimised CPU GEMMs of the ds4 CPU backend: fp8
// (e4m3 + e8m0 32×32 block scales), fp4 (packed e2m1 + per-row e8m0 32-wide
// scales), f32 and bf16 matmuls with the signatures and the numerics of the
// reference kernels in backends/cpu/kernels (spec §6.5), up to summation
// order.
//
// Design:
//
//   - Weights are read as stored; nothing dequantises a whole matrix.
//   - Decode shape (m ≤ decodeMaxM): every weight row is streamed once; its
//     32-wide blocks are dequantised in registers (e4m3 by bit placement and
//     one multiply by 2^(e−7): on AVX2 two codes per 16-bit word, placed
//     as bf16 by arithmetic shifts and split into f32 halves, which avoids
//     a byte-to-dword widening per code; e2m1 on AVX2 by VPSHUFB nibble →
//     bf16-byte tables, on AVX-512 by a VPERMPS table lookup) and, on AVX2,
//     FMA'd against up to 4 activation rows at once (gemvFP4/gemvFP8: one
//     dequantisation per block for all rows, 32 weight rows per call; the
//     activations are permuted once per call into the order the
//     dequantisation produces). The placed e4m3 codes read as their value
//     times 2^-120, so the fp8 activations are multiplied by 2^64 as they
//     are permuted and the block factors divided by it (fp8PreScaleExp):
//     the partials stay normal f32s (subnormal ones lose bits and cost
//     Intel cores microcode assists).
//   - fp4 on AVX2 (fp4q.go): the activations, which act_quant has made e4m3
//     codes times a power of two per 32-block, are packed once per call as
//     16-bit integers with one factor per block (packFP4Q, exact for codes
//     ≥ 1/8 of the scale; other values lose at most 2^-15 of the block's
//     largest magnitude), and gemvFP4Q sums each block in 32-bit integers
//     with VPMADDWD (4 per 64 weights and row instead of 8 widening ops and
//     8 FMAs). Every row count of an fp4 matmul takes this path, up to 6
//     activation rows per weight pass (8 on AVX-512), so a token's result
//     does not depend on the call's shape (decode equals a one-call
//     prefill); the prefill experts run faster than through the f32 GEMM.
//   - AVX-512 forms of the decode kernels give the AVX2 kernels' results
//     bit for bit with half the instructions: gemvFP4Q with two 64-byte
//     VPMADDWD per chunk and row (the integer sums reordered, which is
//     exact), gemvFP8 on two blocks per zmm (the activations permuted by
//     pairs, permuteFP8x32Pairs; each lane sees the AVX2 kernel's
//     operations in order), and bf16 weight rows widened once for up to 6
//     activation rows (dotW16Rows, each row in dotBF16AVX512's order).
//     With AVX-512 VNNI, gemvFP4Q holds two activation rows in each zmm
//     (gemvFP4QVNNI, rows interleaved in pairs by pairFP4QRows): per chunk
//     and pair one VPMADDWD and three VPDPWSSD give both rows' 8 exact
//     dword sums, and one conversion, multiply and FMA do both rows' float
//     steps, lane for lane the AVX2 kernel's (an odd last row takes the
//     one-row kernel), about half the instructions per row.
//   - Weights kept as stored in bf16 (MatmulF32W16, MatmulBF16W16) are
//     widened on the fly, bit-identically to the f32 kernels on the widened
//     values; IndexScore and HCMixes are bit-identical vector versions of
//     the reference kernels (independent outputs in vector lanes, each
//     summed in the reference order). GroupedLoRA runs its groups as fp8
//     matmuls where the scales allow, else bit-identically.
//   - SparseAttn computes its two dot products in f32 (heads in lanes, one
//     FMA chain per logit, one FMA per P·V term in the reference's order);
//     the rest of its numerics are the reference's, and a head's result does
//     not depend on how the heads are grouped over the cores. On AVX-512 the
//     logits take 16 heads × 8 keys a call and a prefill block's P·V runs
//     4 keys at a time for all heads (the keys' vectors kept in registers
//     while each head's row goes through), each head's FMAs those of the
//     AVX2 kernels in their order, so the same bits.
//   - Elementwise ops with reference numerics run in lanes where that is
//     exact: ActQuant (e4m3 rounding on the float32 bits), the exp kernel
//     expF32 (Go's math.Exp FMA path on float64 lanes, used by SwiGLUClamp
//     and the attention softmax), SwiGLUClamp's other steps, RMSNorm and
//     MeanSquare (torch's cascade sum with vector row additions), HCPre,
//     HCPost, BF16RoundSlice, and the decode hc mixes against cached 4-lane
//     panels of fn (HCPanels, owned by the caller per node).
//   - Prefill shape: for a chunk of N columns the weights are dequantised with
//     the block scale folded in (exact: the scales are powers of two) into a
//     packed f32 panel [K][NR], the activations are packed once into
//     [M/MR][K][MR], and a register-blocked MR×NR FMA micro-kernel (12×32 on
//     AVX-512, 6×16 on AVX2) runs over KC-deep slices, each B micro-panel
//     against all of a task's A tiles.
//   - Work is split over N chunks (and M chunks when N is small) and run by
//     GOMAXPROCS goroutines pulling chunk indices from an atomic counter.
//
// The whole-K FMA accumulation differs from the reference's per-block fp32
// partials only in rounding: results agree with the reference to ≤ 1 bf16
// ulp for nearly all elements (tests check ≤ 2 ulp everywhere, ≤ 1 ulp in
// ≥ 99 %).
//
// The assembly is generated by ./asmgen (avo) and chosen at run time with
// golang.org/x/sys/cpu; SetLevel(Portable) forces the pure-Go kernels, which
// are also the only ones on non-amd64 builds.
package fast
