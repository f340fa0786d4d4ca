package cuda

import (
	"fmt"
	"math/bits"

	"github.com/ds4go/ds4/backends/cuda/driver"
)

// The decode kernels of gemv.cuh: block-scaled and plain products for at
// most gemvMaxRows activation rows (weights read once for all of them), the
// routed experts, and the routed gate/up projections fused with SwiGLU.
// Every one keeps the reference's summation order, so its bits equal the
// tiled kernels' (and cpu-ref's).

// gemvMaxRows is the most activation rows the gemv kernels take (GEMV_MR).
const gemvMaxRows = 8

// gemvThreads is GEMV_THREADS, the block of the block-scaled kernels.
const gemvThreads = 256

// gemvSharedMax is the dynamic shared memory a launch may take without
// opting in to more.
const gemvSharedMax = 48 << 10

// gemvTargetBlocks is the grid the launch shapes aim at: 8 blocks for each
// of the H200's 132 SMs (about two waves of 4 resident blocks: enough
// loads in flight, and a short last wave).
const gemvTargetBlocks = 8 * 132

// gemvKernels are the kernel names of one instantiation (1, 2, 4 or 8
// activation rows), made once so a launch formats nothing.
type gemvKernels struct{ fp8, fp4, plainF32, plainBF16, plainFP8, pcFP8 string }

// gemvByRows holds the names by instantiation, index log2 of its rows.
var gemvByRows [4]gemvKernels

func init() {
	for i := range gemvByRows {
		mr := 1 << i
		g := gemvKernels{fp8: fmt.Sprintf("gemv_fp8_m%d", mr), fp4: fmt.Sprintf("gemv_fp4_m%d", mr),
			plainF32: fmt.Sprintf("gemv_plain_m%d_f32w", mr), plainBF16: fmt.Sprintf("gemv_plain_m%d_bf16w", mr),
			plainFP8: fmt.Sprintf("gemv_plain_m%d_fp8w", mr), pcFP8: fmt.Sprintf("gemv_pc_m%d_fp8w", mr)}
		gemvByRows[i] = g
		kernelNames = append(kernelNames, g.fp8, g.fp4, g.plainF32, g.plainBF16, g.plainFP8, g.pcFP8)
	}
	kernelNames = append(kernelNames, "gemv_routed_fp4", "gemv_routed_fp8", "gemv_routed_swiglu_fp4", "gemv_routed_swiglu_fp8")
}

// gemvFor is the instantiation that takes m (1..gemvMaxRows) rows.
func gemvFor(m int) *gemvKernels { return &gemvByRows[bits.Len(uint(gemvMR(m)))-1] }

// gemvMR is the instantiation (1, 2, 4 or 8 rows) that takes m rows.
func gemvMR(m int) int {
	mr := 1
	for mr < m {
		mr *= 2
	}
	return mr
}

// gemvShape picks the rows a block of the block-scaled kernels computes (rb,
// a power of two, returned as its log2) for an n-row weight of kdim columns,
// with ys blocks along y and mr activation rows and dual partial sets
// (1 or 2) in shared memory: the largest rb with rb·mr <= 32 whose partials
// fit, halved while the grid is short of gemvTargetBlocks and the block's
// 256/rb K groups still have a 32-byte chunk each (chunk: 2 K blocks of fp4,
// 1 of fp8). ok is false when even one row's partials do not fit.
func gemvShape(fp4 bool, n, kdim, ys, mr, dual int) (rbLog2, shmem int, ok bool) {
	kb := ceilDiv(kdim, 32)
	chunks := kb
	if fp4 {
		chunks = ceilDiv(kb, 2)
	}
	rb := 32 / mr
	for rb > 1 && kb*rb*mr*4*dual > gemvSharedMax {
		rb /= 2
	}
	if kb*rb*mr*4*dual > gemvSharedMax {
		return 0, 0, false
	}
	for rb > 1 && ceilDiv(n, rb)*ys < gemvTargetBlocks && gemvThreads/(rb/2) <= chunks {
		rb /= 2
	}
	for rb>>rbLog2 > 1 {
		rbLog2++
	}
	return rbLog2, kb * rb * mr * 4 * dual, true
}

// gemvBlockScaled launches gemv_fp8/fp4_mR for m <= gemvMaxRows rows; ok
// is false when the shape does not fit (the caller takes the tiled kernel).
func (k *Kernels) gemvBlockScaled(s *driver.Stream, fp4 bool, what string, out, a driver.Ptr, m, kdim int, w, wScale driver.Ptr, n int) (bool, error) {
	if m > gemvMaxRows {
		return false, nil
	}
	if m <= 0 {
		return true, nil // nothing to compute
	}
	mr := gemvMR(m)
	rbLog2, sh, ok := gemvShape(fp4, n, kdim, 1, mr, 1)
	if !ok {
		return false, nil
	}
	name := gemvFor(mr).fp8
	if fp4 {
		name = gemvFor(mr).fp4
	}
	g := driver.Dim3{X: uint32(ceilDiv(n, 1<<rbLog2)), Y: 1, Z: 1}
	return true, k.launch(s, name, what, g, driver.Dim3{X: gemvThreads, Y: 1, Z: 1}, sh,
		driver.P(out), driver.P(a), driver.I(m), driver.I(kdim), driver.P(w), driver.P(wScale), driver.I(n), driver.I(rbLog2))
}

// gemvRouted launches gemv_routed_fp4/fp8 (MatmulRouted's contract).
func (k *Kernels) gemvRouted(s *driver.Stream, what string, out, a driver.Ptr, adiv, kdim int, r Routed, n int, ids driver.Ptr, rows int) error {
	rbLog2, sh, ok := gemvShape(r.FP4, n, kdim, rows, 1, 1)
	if !ok {
		return fmt.Errorf("cuda routed matmul for %s: k = %d is too long for one block's partials", what, kdim)
	}
	name := "gemv_routed_fp8"
	if r.FP4 {
		name = "gemv_routed_fp4"
	}
	g := driver.Dim3{X: uint32(ceilDiv(n, 1<<rbLog2)), Y: uint32(rows), Z: 1}
	return k.launch(s, name, what, g, driver.Dim3{X: gemvThreads, Y: 1, Z: 1}, sh, driver.P(out), driver.P(a), driver.I(adiv), driver.I(kdim),
		driver.P(r.W), driver.L(r.WStride), driver.P(r.Scale), driver.L(r.ScaleStride), driver.I(n), driver.P(ids), driver.I(r.Experts), driver.I(rbLog2))
}

// MatmulRoutedSwiGLU computes out [rows, n] = SwiGLUClamp(MatmulRouted(a,
// w1), MatmulRouted(a, w3), limit, routeWeight) in one launch, with the
// same bits as those three launches (each product rounded to bf16 as
// MatmulRouted writes it, then swiglu_clamp's arithmetic): the gate and up
// projections of the routed experts, reading each chosen expert's w1 and w3
// rows together. It replaces the IR run expert_matmul(x, w1, idx),
// expert_matmul(x, w3, idx), swiglu_clamp(g, u[, route weights]) when both
// products take the same x and idx and nothing else reads g or u (the
// backend's fusion planner decides that at prepare: fused.go's
// routedSwiGLU). w1 and w3 must have the same format, shape
// and strides; routeWeight (fp32 [rows]) may be 0.
func (k *Kernels) MatmulRoutedSwiGLU(s *driver.Stream, what string, out, a driver.Ptr, adiv, kdim int, w1, w3 Routed, n int, ids driver.Ptr, rows int,
	limit float32, routeWeight driver.Ptr) error {
	if w1.FP4 != w3.FP4 || w1.WStride != w3.WStride || w1.ScaleStride != w3.ScaleStride || w1.Experts != w3.Experts {
		return fmt.Errorf("cuda routed swiglu for %s: w1 and w3 differ in format or layout", what)
	}
	if w1.FP4 && kdim%2 != 0 {
		return fmt.Errorf("cuda routed swiglu for %s: k = %d is odd (fp4 packs two values per byte)", what, kdim)
	}
	if ok, err := k.gemvMMARouted(s, what, out, a, adiv, kdim, w1, w3, n, ids, rows, limit, routeWeight, 0); ok || err != nil {
		return err
	}
	rbLog2, sh, ok := gemvShape(w1.FP4, n, kdim, rows, 1, 2)
	if !ok {
		return fmt.Errorf("cuda routed swiglu for %s: k = %d is too long", what, kdim)
	}
	name := "gemv_routed_swiglu_fp8"
	if w1.FP4 {
		name = "gemv_routed_swiglu_fp4"
	}
	g := driver.Dim3{X: uint32(ceilDiv(n, 1<<rbLog2)), Y: uint32(rows), Z: 1}
	return k.launch(s, name, what, g, driver.Dim3{X: gemvThreads, Y: 1, Z: 1}, sh, driver.P(out), driver.P(a), driver.I(adiv), driver.I(kdim),
		driver.P(w1.W), driver.P(w1.Scale), driver.P(w3.W), driver.P(w3.Scale), driver.L(w1.WStride), driver.L(w1.ScaleStride), driver.I(n),
		driver.P(ids), driver.I(w1.Experts), driver.F(limit), driver.P(routeWeight), driver.I(rbLog2))
}

// gemvPlainBlock is the block of gemv_plain (one thread per output row):
// 256 threads, halved down to 32 while the grid is short of
// gemvTargetBlocks (the grouped wo_a has only 8×1024 rows).
func gemvPlainBlock(n, groups int) int {
	bs := 256
	for bs > 32 && ceilDiv(n, bs)*groups < gemvTargetBlocks {
		bs /= 2
	}
	return bs
}

// gemvPlain launches gemv_plain_mR_* for m <= gemvMaxRows rows (plain's
// arguments); ok is false for more rows.
func (k *Kernels) gemvPlain(s *driver.Stream, what string, out, a driver.Ptr, m, kdim int, w Plain, n, lda, ldo, groups, aZ, oZ int, round bool) (bool, error) {
	if m > gemvMaxRows {
		return false, nil
	}
	if m <= 0 {
		return true, nil // nothing to compute
	}
	r := 0
	if round {
		r = 1
	}
	if ok, err := k.gemvWarp(s, what, out, a, m, kdim, w, n, lda, ldo, groups, aZ, oZ, r); ok || err != nil {
		return ok, err
	}
	bs := gemvPlainBlock(n, groups)
	grid, block := driver.Dim3{X: uint32(ceilDiv(n, bs)), Y: 1, Z: uint32(groups)}, driver.Dim3{X: uint32(bs), Y: 1, Z: 1}
	names := gemvFor(m)
	head := []driver.Arg{driver.P(out), driver.P(a), driver.I(m), driver.I(kdim)}
	tail := []driver.Arg{driver.I(n), driver.I(lda), driver.I(ldo), driver.L(aZ), driver.L(oZ), driver.I(r)}
	switch w.Format {
	case PlainF32:
		return true, k.launch(s, names.plainF32, what, grid, block, 0, append(append(head, driver.P(w.W)), tail...)...)
	case PlainBF16:
		return true, k.launch(s, names.plainBF16, what, grid, block, 0, append(append(head, driver.P(w.W)), tail...)...)
	case PlainFP8:
		if kdim%16 == 0 && lda%4 == 0 && aZ%4 == 0 && a%16 == 0 && w.W%16 == 0 {
			// the producer/consumer kernel: 32 rows a block of 128 threads
			grid, block = driver.Dim3{X: uint32(ceilDiv(n, 32)), Y: 1, Z: uint32(groups)}, driver.Dim3{X: 128, Y: 1, Z: 1}
			return true, k.launch(s, names.pcFP8, what, grid, block, 0, append(append(head, driver.P(w.W), driver.P(w.Scale)), tail...)...)
		}
		return true, k.launch(s, names.plainFP8, what, grid, block, 0, append(append(head, driver.P(w.W), driver.P(w.Scale)), tail...)...)
	}
	return true, fmt.Errorf("cuda matmul for %s: unknown weight format %d", what, w.Format)
}
