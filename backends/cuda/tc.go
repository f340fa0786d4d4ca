package cuda

import (
	"fmt"
	"sync"

	"github.com/ds4go/ds4/backends/cuda/driver"
)

// The tensor-core products of prefill (kernels/gemm_tc.cuh): the tiling and
// pipeline depth the kernels are built with.
const (
	tcBM, tcBN, tcBK = 128, 128, 128
	tcStages         = 4
	tcThreads        = 256
	// tcMinRows is the fewest rows the tensor-core path is offered for: below
	// it a 128-row tile is mostly padding and the decode kernels serve.
	tcMinRows = 128
)

// tcShared is the dynamic shared memory of matmul_fp8_tc / matmul_fp4_tc
// (TC_STAGES · TCStage<FP4>::bytes).
func tcShared(fp4 bool) int {
	b, ws := tcBN*tcBK, (tcBN/32)*(tcBK/32)
	if fp4 {
		b, ws = tcBN*tcBK/2, tcBN*(tcBK/32)
	}
	ws = (ws + 15) / 16 * 16
	return tcStages * (tcBM*tcBK + b + tcBM*(tcBK/32)*4 + ws)
}

// tcEligible reports whether the tensor-core product takes an m×kdim·kdim×n
// block-scaled product: K a whole number of 128-wide tiles, at least
// tcMinRows rows (prefill), and a grid CUDA can launch. Its results are
// within the golden tolerance of the reference, not bit-identical (the MMA
// sums each 32-block partial in its own order).
func tcEligible(m, kdim, n int) bool {
	return m >= tcMinRows && kdim > 0 && kdim%tcBK == 0 && n > 0 && ceilDiv(m, tcBM) <= maxGridYZ
}

// TCScratchBytes is the scratch MatmulFP8TC / MatmulFP4TC need for m rows of
// kdim activations: their e4m3 codes (m·kdim bytes) then fp32 scales
// (m·kdim/32).
func TCScratchBytes(m, kdim int) int { return m*kdim + m*(kdim/32)*4 }

type tcKey struct {
	k    *Kernels
	name string
}

// tcFuncs caches the tensor-core functions of each Kernels (looked up on
// first use, with their shared-memory limit raised), so kernels.go's list
// of names need not know them.
var tcFuncs sync.Map

func (k *Kernels) tcFunc(name string, shmem int) (driver.Function, error) {
	key := tcKey{k, name}
	if f, ok := tcFuncs.Load(key); ok {
		return f.(driver.Function), nil
	}
	f, err := k.mod.Function(name)
	if err != nil {
		return f, err
	}
	if shmem > 48<<10 {
		if err := k.mod.SetMaxDynamicShared(f, shmem); err != nil {
			return f, err
		}
	}
	tcFuncs.Store(key, f)
	return f, nil
}

func (k *Kernels) tcLaunch(s *driver.Stream, name, what string, grid, block driver.Dim3, shmem int, args ...driver.Arg) error {
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 {
		return nil
	}
	if grid.Y > maxGridYZ || grid.Z > maxGridYZ {
		return fmt.Errorf("cuda %s for %s: grid %d×%d×%d is beyond the %d a grid's y and z may hold", name, what, grid.X, grid.Y, grid.Z, maxGridYZ)
	}
	f, err := k.tcFunc(name, shmem)
	if err != nil {
		return err
	}
	return s.Launch(f, grid, block, shmem, what, args...)
}

// TCQuantA writes the e4m3 codes [m, kdim] and fp32 scales [m, kdim/32] of
// fake-quantised activations a (act_quant's output, blocks of 32 along K)
// to codes and scales: codes·scale reproduces a exactly, so the product on
// them equals the product on a.
func (k *Kernels) TCQuantA(s *driver.Stream, what string, codes, scales, a driver.Ptr, m, kdim int) error {
	if kdim%32 != 0 {
		return fmt.Errorf("cuda tc_quant_a for %s: k = %d is not a multiple of 32", what, kdim)
	}
	nb := m * kdim / 32
	g, b := grid1(nb)
	return k.tcLaunch(s, "tc_quant_a", what, g, b, 0, driver.P(codes), driver.P(scales), driver.P(a), driver.L(nb))
}

// tcWGShared is matmul_fp8_wg's shared memory: TC_STAGES stages of
// TC_WG_STAGE bytes and 1024 for aligning them; tcWHShared matmul_fp8_wh's,
// which adds its f16 tiles.
const (
	tcWGShared = tcStages*35840 + 1024
	tcWHShared = tcWGShared + 65536
)

// tcF16 picks matmul_fp8_wh (wgmma on f16-widened tiles) for the fp8
// products when Kernels.WGMMA is off. Off: within the tolerance (it matched the
// reference as mma.sync does) but no faster as it stands (215 against 220
// TFLOP/s on wq_a at 8192 tokens: the widening, two barriers a K tile and
// the wait after each block's wgmma serialise it); the skeleton for
// overlapping the scaled adds with the next block's wgmma.
var tcF16 = false

func (k *Kernels) tcProduct(s *driver.Stream, fp4 bool, what string, out, codes, scales driver.Ptr, m, kdim int, w, wScale driver.Ptr, n int) error {
	name, sh := "matmul_fp8_tc", tcShared(false)
	switch {
	case fp4:
		name, sh = "matmul_fp4_tc", tcShared(true)
	case k.WGMMA:
		name, sh = "matmul_fp8_wg", tcWGShared
	case tcF16:
		name, sh = "matmul_fp8_wh", tcWHShared
	}
	return k.tcKernel(s, name, sh, what, out, codes, scales, m, kdim, w, wScale, n)
}

func (k *Kernels) tcKernel(s *driver.Stream, name string, sh int, what string, out, codes, scales driver.Ptr, m, kdim int, w, wScale driver.Ptr, n int) error {
	if kdim <= 0 || kdim%tcBK != 0 {
		return fmt.Errorf("cuda %s for %s: k = %d is not a positive multiple of %d", name, what, kdim, tcBK)
	}
	grid := driver.Dim3{X: uint32(ceilDiv(n, tcBN)), Y: uint32(ceilDiv(m, tcBM)), Z: 1}
	block := driver.Dim3{X: tcThreads, Y: 1, Z: 1}
	return k.tcLaunch(s, name, what, grid, block, sh,
		driver.P(out), driver.P(codes), driver.P(scales), driver.I(m), driver.I(kdim), driver.P(w), driver.P(wScale), driver.I(n))
}

// MatmulFP8TCCodes is MatmulFP8 on FP8 tensor cores from the activations'
// codes (e4m3 [m, kdim]) and scales (fp32 [m, kdim/32]), as ActQuant
// writes them. kdim % 128 == 0; results within the golden tolerance.
func (k *Kernels) MatmulFP8TCCodes(s *driver.Stream, what string, out, codes, scales driver.Ptr, m, kdim int, w, wScale driver.Ptr, n int) error {
	return k.tcProduct(s, false, what, out, codes, scales, m, kdim, w, wScale, n)
}

// MatmulFP4TCCodes is MatmulFP4TC from the activations' codes and scales.
func (k *Kernels) MatmulFP4TCCodes(s *driver.Stream, what string, out, codes, scales driver.Ptr, m, kdim int, w, wScale driver.Ptr, n int) error {
	return k.tcProduct(s, true, what, out, codes, scales, m, kdim, w, wScale, n)
}

// MatmulFP8TC is MatmulFP8 (same arguments) on FP8 tensor cores: the
// fake-quantised activations a are turned back into codes and scales in
// scratch (TCScratchBytes(m, kdim) bytes), then multiplied. kdim % 128 == 0
// (tcEligible); results within the golden tolerance of the reference.
func (k *Kernels) MatmulFP8TC(s *driver.Stream, what string, out, a driver.Ptr, m, kdim int, w, wScale driver.Ptr, n int, scratch driver.Ptr) error {
	codes, scales := scratch, scratch+driver.Ptr(m*kdim)
	if err := k.TCQuantA(s, what, codes, scales, a, m, kdim); err != nil {
		return err
	}
	return k.tcProduct(s, false, what, out, codes, scales, m, kdim, w, wScale, n)
}

// MatmulFP4TC is MatmulFP4 (same arguments: w packed e2m1 [n, kdim/2],
// wScale e8m0 [n, kdim/32]) on FP8 tensor cores, the e2m1 codes widened
// exactly to e4m3 as the tiles are read; scratch as for MatmulFP8TC.
func (k *Kernels) MatmulFP4TC(s *driver.Stream, what string, out, a driver.Ptr, m, kdim int, w, wScale driver.Ptr, n int, scratch driver.Ptr) error {
	codes, scales := scratch, scratch+driver.Ptr(m*kdim)
	if err := k.TCQuantA(s, what, codes, scales, a, m, kdim); err != nil {
		return err
	}
	return k.tcProduct(s, true, what, out, codes, scales, m, kdim, w, wScale, n)
}

// MatmulTCGrouped is the routed experts' product at prefill on tensor
// cores, rows grouped by expert: group q is rows offs[q]..offs[q+1] of
// codes (e4m3 [rows, kdim]), scales (fp32 [rows, kdim/32]) and out
// ([rows, n]), multiplied by expert ids[q] of r (fp4 or fp8 stack); offs
// (int32 [groups+1]) and ids (int64 [groups]) stay on the GPU, so the
// counts the gate chose need not come back to the host. rows bounds
// offs[groups]. Each group's rows equal MatmulFP4TCCodes/MatmulFP8TCCodes
// with that expert's weights. With rmap (int32 [rows], 0: none), product
// row i reads row rmap[i]/adiv of codes and scales and writes row rmap[i]
// of out (RouteGroups' perm: the rows stay where the gate put them).
func (k *Kernels) MatmulTCGrouped(s *driver.Stream, what string, out, codes, scales driver.Ptr, rows, kdim int, r Routed, n int, offs, ids driver.Ptr, groups int,
	rmap driver.Ptr, adiv int) error {
	name := "matmul_fp8_tc_grouped"
	if r.FP4 {
		name = "matmul_fp4_tc_grouped"
	}
	if kdim <= 0 || kdim%tcBK != 0 {
		return fmt.Errorf("cuda %s for %s: k = %d is not a positive multiple of %d", name, what, kdim, tcBK)
	}
	if groups <= 0 || rows <= 0 {
		return nil
	}
	grid := driver.Dim3{X: uint32(ceilDiv(n, tcBN)), Y: uint32(ceilDiv(rows, tcBM) + groups), Z: 1}
	return k.tcLaunch(s, name, what, grid, driver.Dim3{X: tcThreads, Y: 1, Z: 1}, tcShared(r.FP4),
		driver.P(out), driver.P(codes), driver.P(scales), driver.I(kdim), driver.P(r.W), driver.L(r.WStride),
		driver.P(r.Scale), driver.L(r.ScaleStride), driver.I(n), driver.P(offs), driver.P(ids), driver.I(groups), driver.I(r.Experts),
		driver.P(rmap), driver.I(max(adiv, 1)))
}
