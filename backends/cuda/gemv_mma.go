package cuda

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/ds4go/ds4/backends/cuda/driver"
)

// The tensor-core decode kernels of gemv_mma.cuh: the block-scaled fp8/fp4
// products for up to gemvMaxRows activation rows, the routed experts and
// the routed gate/up projections with SwiGLU. Their block partials come
// from mma.sync and their K groups are added in a fixed order other than
// the reference's single chain: within the golden tolerance, not cpu-ref's
// bits (Kernels.Exact keeps gemv.cuh's exact kernels).

// gmmaThreads is GMMA_THREADS (8 warps).
const gmmaThreads = 256

// gmmaByRows are the kernel names by log2 of the activation rows.
var gmmaByRows [4]struct{ fp8, fp4 string }

func init() {
	for i := range gmmaByRows {
		gmmaByRows[i].fp8 = fmt.Sprintf("gemv_mma_fp8_m%d", 1<<i)
		gmmaByRows[i].fp4 = fmt.Sprintf("gemv_mma_fp4_m%d", 1<<i)
	}
	kernelNames = append(kernelNames, gmmaNames()...)
	for i := range gemvWarpByRows {
		mr := 1 << i
		gemvWarpByRows[i] = [3]string{fmt.Sprintf("gemv_warp_m%d_f32w", mr), fmt.Sprintf("gemv_warp_m%d_bf16w", mr), fmt.Sprintf("gemv_warp_m%d_fp8w", mr)}
		kernelNames = append(kernelNames, gemvWarpByRows[i][:]...)
	}
}

// gmma_run's geometry (gemv_mma.cuh): GMMA_STAGES (4) ring stages per warp
// and weight of 16 rows × 160 (fp8) or 144 (fp4) bytes, 8 warps a CTA,
// spans of 128 bytes of a row; the opt-in shared memory its kernels ask
// for (the H200's most a block), and the scratch of the chunk sums: floats
// and tile counters, allocated once (setupGMMA).
const (
	gmmaStages    = 4
	gmmaSpan      = 128
	gmmaSharedMax = 227 << 10
	gmmaPartMax   = 4 << 20
	gmmaCntMax    = 64 << 10
)

func gmmaRingBytes(fp4 bool) int {
	rs := 160
	if fp4 {
		rs = 144
	}
	return gmmaThreads / 32 * gmmaStages * 16 * rs
}

// gmmaGrid is the CTAs of a tensor-core launch of shared bytes a CTA: one
// wave, as many as the H200's 132 SMs hold at once, up to 4 each (the
// registers' limit); the kernel splits its items over the warps.
func gmmaGrid(shared int) int {
	return 132 * max(1, min(4, (227<<10)/(shared+1024)))
}

// gmmaChunk picks the spans an item (a 16-row tile's chunk of K) for units
// (routed rows × tiles) of nspan spans over warps: the smallest time, in
// spans a warp, with half a span for each item's end (its sums, counter,
// and the reduction of the last); the chunk sums must fit the scratch
// (cols · 16 floats an item and weight) and the counters the tiles. A
// chunk of nspan needs neither.
func gmmaChunk(nspan, units, warps, cols, nw int) int {
	best, bestCost := nspan, math.Inf(1)
	for c := nspan; c >= 1; c-- {
		nc := (nspan + c - 1) / c
		if !gmmaFits(units, nc, cols, nw) {
			continue
		}
		per := (units*nc + warps - 1) / warps
		cost := float64(per) * (float64(c) + 0.5)
		if nc == 1 {
			cost = float64(per) * float64(nspan)
		}
		if cost < bestCost-1e-9 {
			best, bestCost = c, cost
		}
	}
	return best
}

// gmmaFits reports whether nc chunks a row of units fit the scratch: a
// chunk of the whole row (nc 1) needs none, else the chunk sums (cols · 16
// floats an item and weight) and a counter a unit.
func gmmaFits(units, nc, cols, nw int) bool {
	return nc == 1 || (units <= gmmaCntMax && units*nc*cols*16*nw <= gmmaPartMax)
}

// gmmaShared is the dynamic shared memory of the tensor-core kernels for mr
// activation rows of kdim (codes, scales, the rings; nw weights read
// together), and whether they take the shape: rows of a multiple of 128
// bytes, 16-byte aligned weights and activations, and the shared memory
// within the kernels' limit (the callers check that the scales are 8-byte
// aligned: a span reads its scale bytes as one word).
func (k *Kernels) gmmaShared(fp4 bool, mr, kdim, nw int, a, w driver.Ptr) (int, bool) {
	rowBytes := kdim
	if fp4 {
		rowBytes = kdim / 2
	}
	sh := mr*kdim + 4*mr*(kdim/32) + nw*gmmaRingBytes(fp4)
	return sh, kdim > 0 && kdim%32 == 0 && rowBytes%gmmaSpan == 0 && a%16 == 0 && w%16 == 0 && sh <= k.gmmaLimit
}

// setupGMMA raises the shared memory limit of the tensor-core kernels to
// gmmaSharedMax and allocates their scratch, the counters zeroed (the
// kernels leave them so); where the driver refuses either, the decode
// products take gemv.cuh's kernels (gmmaLimit 0).
func (k *Kernels) setupGMMA(c *driver.Context) error {
	for _, name := range gmmaNames() {
		if err := k.mod.SetMaxDynamicShared(k.fn[name], gmmaSharedMax); err != nil {
			return nil
		}
	}
	part, err := c.Alloc(4*gmmaPartMax, "the tensor-core decode products' chunk sums")
	if err != nil {
		return nil
	}
	// the counters, then gemvMaxRows int64 zeros: the expert ids of a
	// stack of one (sharedSwiGLU), which no kernel writes
	const cntBytes = 4*gmmaCntMax + 8*gemvMaxRows
	cnt, err := c.Alloc(cntBytes, "the tensor-core decode products' tile counters")
	if err != nil {
		c.Free(part, "the chunk sums")
		return nil
	}
	st, err := c.NewStream()
	if err == nil {
		err = st.Memset(cnt, 0, cntBytes, "the tile counters")
		if err == nil {
			err = st.Sync("zeroing the tile counters")
		}
		st.Destroy()
	}
	if err != nil {
		c.Free(part, "the chunk sums")
		c.Free(cnt, "the tile counters")
		return err
	}
	k.ctx, k.gmmaPart, k.gmmaCnt, k.gmmaLimit = c, part, cnt, gmmaSharedMax
	return nil
}

// closeGMMA frees setupGMMA's scratch.
func (k *Kernels) closeGMMA() {
	if k.gmmaPart != 0 {
		k.ctx.Free(k.gmmaPart, "the chunk sums")
		k.ctx.Free(k.gmmaCnt, "the tile counters")
		k.gmmaPart, k.gmmaCnt = 0, 0
	}
}

// gmmaNames are the tensor-core decode kernels' names.
func gmmaNames() []string {
	var names []string
	for _, g := range gmmaByRows {
		names = append(names, g.fp8, g.fp4)
	}
	return append(names, "gemv_mma_routed_fp4", "gemv_mma_routed_fp8", "gemv_mma_routed_swiglu_fp4", "gemv_mma_routed_swiglu_fp8")
}

// gmmaPlan is a launch's grid and chunk: units (routed rows × 16-row
// tiles) of rows of rowBytes, cols MMA columns, nw weights.
func gmmaPlan(shared, units, rowBytes, cols, nw int) (driver.Dim3, int) {
	ctas := gmmaGrid(shared)
	chunk := gmmaChunk(rowBytes/gmmaSpan, units, ctas*gmmaThreads/32, cols, nw)
	return driver.Dim3{X: uint32(ctas), Y: 1, Z: 1}, chunk
}

// gemvMMA launches gemv_mma_fp8/fp4_mR for m <= gemvMaxRows rows; ok is
// false when it does not apply (Exact, the shape; the caller goes on).
func (k *Kernels) gemvMMA(s *driver.Stream, fp4 bool, what string, out, a driver.Ptr, m, kdim int, w, wScale driver.Ptr, n int) (bool, error) {
	if k.Exact || m <= 0 || m > gemvMaxRows {
		return false, nil
	}
	mr := gemvMR(m)
	sh, ok := k.gmmaShared(fp4, m, kdim, 1, a, w)
	if !ok || wScale%8 != 0 {
		return false, nil
	}
	names := &gmmaByRows[bits.Len(uint(mr))-1]
	name := names.fp8
	if fp4 {
		name = names.fp4
	}
	rowBytes := kdim
	if fp4 {
		rowBytes /= 2
	}
	g, chunk := gmmaPlan(sh, ceilDiv(n, 16), rowBytes, mr, 1)
	return true, k.launch(s, name, what, g, driver.Dim3{X: gmmaThreads, Y: 1, Z: 1}, sh,
		driver.P(out), driver.P(a), driver.I(m), driver.I(kdim), driver.P(w), driver.P(wScale), driver.I(n), driver.I(chunk),
		driver.P(k.gmmaPart), driver.P(k.gmmaCnt))
}

// gemvMMARouted launches gemv_mma_routed_* (w3.W == 0) or
// gemv_mma_routed_swiglu_* (w1 and w3 checked alike by the caller); ok is
// false when it does not apply.
// A chunk > 0 replaces the planned one (MatmulSharedSwiGLU).
func (k *Kernels) gemvMMARouted(s *driver.Stream, what string, out, a driver.Ptr, adiv, kdim int, w1, w3 Routed, n int, ids driver.Ptr, rows int,
	limit float32, routeWeight driver.Ptr, chunk int) (bool, error) {
	if k.Exact || rows <= 0 || adiv <= 0 {
		return false, nil
	}
	nw := 1
	if w3.W != 0 {
		nw = 2
	}
	sh, ok := k.gmmaShared(w1.FP4, ceilDiv(rows, adiv), kdim, nw, a, w1.W)
	if !ok || w1.WStride%16 != 0 || w3.W%16 != 0 || w1.Scale%8 != 0 || w3.Scale%8 != 0 || w1.ScaleStride%8 != 0 {
		return false, nil
	}
	rowBytes := kdim
	if w1.FP4 {
		rowBytes /= 2
	}
	g, planned := gmmaPlan(sh, rows*ceilDiv(n, 16), rowBytes, 1, nw)
	if chunk <= 0 {
		chunk = planned
	} else if !gmmaFits(rows*ceilDiv(n, 16), ceilDiv(rowBytes/gmmaSpan, chunk), 1, nw) {
		return false, nil
	}
	b := driver.Dim3{X: gmmaThreads, Y: 1, Z: 1}
	if w3.W == 0 {
		name := "gemv_mma_routed_fp8"
		if w1.FP4 {
			name = "gemv_mma_routed_fp4"
		}
		return true, k.launch(s, name, what, g, b, sh, driver.P(out), driver.P(a), driver.I(adiv), driver.I(kdim),
			driver.P(w1.W), driver.L(w1.WStride), driver.P(w1.Scale), driver.L(w1.ScaleStride), driver.I(n), driver.P(ids), driver.I(w1.Experts),
			driver.I(rows), driver.I(chunk), driver.P(k.gmmaPart), driver.P(k.gmmaCnt))
	}
	name := "gemv_mma_routed_swiglu_fp8"
	if w1.FP4 {
		name = "gemv_mma_routed_swiglu_fp4"
	}
	return true, k.launch(s, name, what, g, b, sh, driver.P(out), driver.P(a), driver.I(adiv), driver.I(kdim),
		driver.P(w1.W), driver.P(w1.Scale), driver.P(w3.W), driver.P(w3.Scale), driver.L(w1.WStride), driver.L(w1.ScaleStride), driver.I(n),
		driver.P(ids), driver.I(w1.Experts), driver.F(limit), driver.P(routeWeight), driver.I(rows), driver.I(chunk),
		driver.P(k.gmmaPart), driver.P(k.gmmaCnt))
}

// MatmulSharedSwiGLU computes out [m, n] = SwiGLUClamp(MatmulFP8(a, w1),
// MatmulFP8(a, w3), limit, routeWeight) for m <= gemvMaxRows rows in one
// launch: the routed SwiGLU pair kernel over a stack of one expert (every
// row's id 0, w1's and w3's rows read together), with the chunk the plain
// product of m rows takes, so that each product's sums are MatmulFP8's and
// the result has the three launches' bits. ok is false where the
// tensor-core kernels do not take the shape (the caller launches those
// three).
func (k *Kernels) MatmulSharedSwiGLU(s *driver.Stream, what string, out, a driver.Ptr, m, kdim int, w1, s1, w3, s3 driver.Ptr, n int, limit float32,
	routeWeight driver.Ptr) (bool, error) {
	if k.Exact || m <= 0 || m > gemvMaxRows || k.gmmaCnt == 0 {
		return false, nil
	}
	sh, ok := k.gmmaShared(false, m, kdim, 1, a, w1)
	if !ok || s1%8 != 0 {
		return false, nil
	}
	_, chunk := gmmaPlan(sh, ceilDiv(n, 16), kdim, gemvMR(m), 1)
	one := func(w, sc driver.Ptr) Routed { return Routed{W: w, Scale: sc, Experts: 1} }
	return k.gemvMMARouted(s, what, out, a, 1, kdim, one(w1, s1), one(w3, s3), n, k.gmmaCnt+4*gmmaCntMax, m, limit, routeWeight, chunk)
}

// gemvWarpByRows are gemv_warp's kernel names by log2 of the activation
// rows and by PlainFormat (PlainF32, PlainBF16, PlainFP8: its values).
var gemvWarpByRows [4][3]string

// gemvWarpSplit returns the rows a warp takes (rpw) and the warps that
// share a row (kw) for n rows in each of groups: the most rows a warp that
// still give four CTAs of 8 warps an SM (132 of them), then, with one row
// a warp and still fewer CTAs, up to 8 warps a row, so that the loads in
// flight are enough for the memory (the gate's 384 rows ran at ~8 µs on
// 48 CTAs of one warp a row).
func gemvWarpSplit(n, groups int) (rpw, kw int) {
	const ctas = 4 * 132
	rpw, kw = 8, 1
	for rpw > 1 && ceilDiv(n, 8*rpw)*groups < ctas {
		rpw /= 2
	}
	for rpw == 1 && kw < 8 && ceilDiv(n*kw, 8)*groups < ctas {
		kw *= 2
	}
	return rpw, kw
}

// gemvWarp launches gemv_warp_mR_* (the plain decode products with a
// warp's lanes along K) for m <= gemvMaxRows rows; ok is false when it does
// not apply (Exact, or rows, activations or groups not 16-byte aligned).
func (k *Kernels) gemvWarp(s *driver.Stream, what string, out, a driver.Ptr, m, kdim int, w Plain, n, lda, ldo, groups, aZ, oZ, round int) (bool, error) {
	size := 0 // bytes a weight
	switch w.Format {
	case PlainF32:
		size = 4
	case PlainBF16:
		size = 2
	case PlainFP8:
		size = 1
	}
	if k.Exact || size == 0 || (kdim*size)%16 != 0 || w.W%16 != 0 || a%16 != 0 || lda%4 != 0 || aZ%4 != 0 {
		return false, nil
	}
	rpw, kw := gemvWarpSplit(n, groups)
	name := gemvWarpByRows[bits.Len(uint(gemvMR(m)))-1][w.Format]
	args := []driver.Arg{driver.P(out), driver.P(a), driver.I(m), driver.I(kdim), driver.P(w.W)}
	if w.Format == PlainFP8 {
		args = append(args, driver.P(w.Scale))
	}
	args = append(args, driver.I(n), driver.I(lda), driver.I(ldo), driver.L(aZ), driver.L(oZ), driver.I(round), driver.I(rpw), driver.I(kw))
	g := driver.Dim3{X: uint32(ceilDiv(n*kw, 8*rpw)), Y: 1, Z: uint32(groups)}
	return true, k.launch(s, name, what, g, driver.Dim3{X: gmmaThreads, Y: 1, Z: 1}, 0, args...)
}
