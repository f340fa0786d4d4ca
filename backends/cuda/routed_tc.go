package cuda

import "github.com/ds4go/ds4/backends/cuda/driver"

func init() {
	kernelNames = append(kernelNames, "route_count", "route_perm")
}

// routeGroups is a routing's rows grouped by expert on the GPU (RouteGroups):
// offs (int32 [groups+1]), the groups' expert ids gid (int64 [groups]; the
// last group, of the ids outside the stack, is -1 and poisoned) and perm
// (int32 [rows]: the rows, expert by expert, each in ascending order).
type routeGroups struct {
	offs, gid, perm driver.Ptr
	groups          int
}

// routeScratchBytes is the scratch RouteGroups needs for rows of experts.
func routeScratchBytes(rows, experts int) int {
	g := experts + 1
	return 16*ceilDiv(4*g, 16) + 16*ceilDiv(4*(g+1), 16) + 8*g + 16*ceilDiv(4*rows, 16)
}

// RouteGroups groups the rows of ids (int64 [rows], the gate's choices,
// left on the GPU) by expert for the grouped prefill products, in scratch
// (routeScratchBytes): a stable counting sort, two launches.
func (k *Kernels) RouteGroups(s *driver.Stream, what string, ids driver.Ptr, rows, experts int, scratch driver.Ptr) (routeGroups, error) {
	g := experts + 1
	cnt := scratch
	offs := cnt + driver.Ptr(16*ceilDiv(4*g, 16))
	gid := offs + driver.Ptr(16*ceilDiv(4*(g+1), 16))
	perm := gid + driver.Ptr(8*g)
	rg := routeGroups{offs: offs, gid: gid, perm: perm, groups: g}
	grid, block := driver.Dim3{X: uint32(g), Y: 1, Z: 1}, driver.Dim3{X: 256, Y: 1, Z: 1}
	if err := k.launch(s, "route_count", what, grid, block, 0, driver.P(ids), driver.I(rows), driver.I(experts), driver.P(cnt)); err != nil {
		return rg, err
	}
	return rg, k.launch(s, "route_perm", what, grid, block, 0, driver.P(ids), driver.I(rows), driver.I(experts), driver.P(cnt), driver.P(offs),
		driver.P(gid), driver.P(perm))
}

// routedTC reports whether the routed product of rows rows (adiv rows an
// input row) of kdim goes to the grouped tensor-core kernels: prefill
// (more rows than the decode kernels take), act_quant's input, a shape the
// tensor-core tiles take.
func (k *Kernels) routedTC(quantised bool, rows, adiv, kdim, n int) bool {
	return !k.Exact && quantised && rows > gemvMaxRows && adiv > 0 && rows%adiv == 0 && tcEligible(rows, kdim, n)
}

// MatmulRoutedTC is MatmulRouted at prefill on tensor cores: the input
// rows' codes and scales (TCQuantA of act_quant's output, rows/adiv rows
// of kdim) times each expert's weights for its rows of rg, one grouped
// launch, written in place in out [rows, n]. Within the golden tolerance
// (the tensor-core products' order).
func (k *Kernels) MatmulRoutedTC(s *driver.Stream, what string, out, codes, scales driver.Ptr, adiv, kdim int, r Routed, n int, rg routeGroups,
	rows int) error {
	return k.MatmulTCGrouped(s, what, out, codes, scales, rows, kdim, r, n, rg.offs, rg.gid, rg.groups, rg.perm, adiv)
}
