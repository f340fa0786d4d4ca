package cuda

import (
	"fmt"

	"github.com/ds4go/ds4/backends/cuda/driver"
)

// kernelNames are the kernels of ds4.cu that Kernels binds.
var kernelNames = []string{
	"rms_norm", "act_quant", "fp4_act_quant", "matmul_fp8", "matmul_fp4",
	"matmul_fp4_routed", "matmul_fp8_routed", "matmul_fp8_gemv", "matmul_fp4_gemv", "swiglu_clamp", "rotary", "embed_bf16",
	"gate_logits", "gate_select", "hc_mixes", "hc_mixes_fast", "hc_split_sinkhorn", "hc_sinkhorn_slots", "hc_split_sinkhorn4", "hc_sinkhorn_slots4", "hc_pre", "hc_post",
	"sparse_attn", "matmul_f32w", "matmul_bf16w", "index_score", "index_causal_mask",
	"apply_candidates", "rope_rows", "index_topk", "select_candidate_blocks", "compressor_pool_prefill",
	"compressor_pool_decode", "engram_hash", "engram_lookup", "engram_gate",
	"matmul_fp8w", "matmul_bf16w_tc", "matmul_fp8w_tc", "unary_op", "binary_op", "copy_strided", "mean_sq", "sum_inner", "sum_outer",
	"softmax_rows", "topk_idx", "gather_rows", "moe_combine", "token_map",
}

// Kernels are the loaded kernels of one context. Each method enqueues one
// launch on a stream (nothing waits: results stay on the device until a
// Download); what names the op or node it serves, for errors. Buffers are
// fp32 activations holding bf16 values (as the reference's), byte buffers
// of quantised codes and e8m0 scales, and int32 ids and positions.
type Kernels struct {
	mod *driver.Module
	fn  map[string]driver.Function
	// Exact keeps every op on the kernels that replay cpu-ref's summation
	// order and so give its bits (the backend option cuda-exact), instead
	// of the faster ones that sum in another fixed order, within the golden
	// tolerance (gemv_mma.cuh's tensor-core and warp-along-K decode
	// products, hc_mixes_fast and HCMixSplit's two-launch form).
	Exact bool
	// WGMMA picks matmul_fp8_wg (Hopper wgmma) over matmul_fp8_tc
	// (mma.sync) for the fp8 prefill products (backend option cuda-wgmma,
	// default off; the fp4 ones always run matmul_fp4_tc). On the H200 it
	// ran at 1.75x the mma.sync kernel (386 against 220 TFLOP/s, wq_a at
	// 8192 tokens), but wgmma's fp8 sums keep only about 13 bits of each
	// 32-block partial (errors ~2^-13 of the block's largest product: 2.7 %
	// of outputs off the reference on checkpoint-like data, up to
	// thousands of their own ulps where outputs cancel), where mma.sync's
	// e4m3 partials matched the reference bit for bit.
	WGMMA bool
	// gmmaLimit is the dynamic shared memory the tensor-core decode kernels
	// may take, 0 where they are off; gmmaPart and gmmaCnt are their chunk
	// sums and tile counters (setupGMMA; gemvMaxRows int64 zeros follow the
	// counters: the ids of a stack of one expert), on ctx.
	gmmaLimit         int
	gmmaPart, gmmaCnt driver.Ptr
	ctx               *driver.Context
}

// LoadKernels loads image (nil: the embedded fatbin) into c.
func LoadKernels(c *driver.Context, image []byte) (*Kernels, error) {
	if image == nil {
		if err := CheckFatbin(); err != nil {
			return nil, err
		}
		image = fatbin
	}
	mod, err := c.LoadModule(image, FatbinName)
	if err != nil {
		return nil, err
	}
	k := &Kernels{mod: mod, fn: map[string]driver.Function{}}
	for _, name := range kernelNames {
		f, err := mod.Function(name)
		if err != nil {
			mod.Unload()
			return nil, err
		}
		k.fn[name] = f
	}
	if f, err := mod.Function("pre_norm_quant"); err == nil { // RMSNorm's few-row form (an older image lacks it)
		k.fn["pre_norm_quant"] = f
	}
	if err := k.setupGMMA(c); err != nil {
		mod.Unload()
		return nil, err
	}
	return k, nil
}

// Close unloads the module.
func (k *Kernels) Close() error {
	k.closeGMMA()
	return k.mod.Unload()
}

// maxGridYZ is CUDA's limit on a grid's y and z extents.
const maxGridYZ = 65535

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// grid1 is a 1-D launch of n threads in blocks of 256.
func grid1(n int) (driver.Dim3, driver.Dim3) {
	return driver.Dim3{X: uint32(ceilDiv(n, 256)), Y: 1, Z: 1}, driver.Dim3{X: 256, Y: 1, Z: 1}
}

func (k *Kernels) launch(s *driver.Stream, name, what string, grid, block driver.Dim3, shmem int, args ...driver.Arg) error {
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 {
		return nil // nothing to compute
	}
	if grid.Y > maxGridYZ || grid.Z > maxGridYZ {
		return fmt.Errorf("cuda %s for %s: grid %d×%d×%d is beyond the %d a grid's y and z may hold", name, what, grid.X, grid.Y, grid.Z, maxGridYZ)
	}
	return s.Launch(k.fn[name], grid, block, shmem, what, args...)
}

// rmsNormBlockRows: RMSNorm of fewer rows runs pre_norm_quant's block per
// row; a warp's row there is a chain of dependent loads (~65 µs for one
// row on the H200), which only many rows hide (256 rows of 5120: 12.5 µs
// with a warp a row, 40.6 µs with a block a row).
const rmsNormBlockRows = 32

// RMSNorm is kernels.RMSNorm: out = bf16(w·fp32(x·rsqrt(mean(x²)+eps))) per
// row of x [rows, dim]; out may alias x.
func (k *Kernels) RMSNorm(s *driver.Stream, what string, out, x, w driver.Ptr, rows, dim int, eps float32) error {
	if _, ok := k.fn["pre_norm_quant"]; ok && rows < rmsNormBlockRows && dim <= preNormMaxDim {
		// a block per row: its loads in flight together, the same bits
		return k.PreNormQuant(s, what, out, 0, x, 0, 0, 0, w, rows, dim, eps, 0, 0)
	}
	return k.rmsNormWarps(s, what, out, x, w, rows, dim, eps)
}

// rmsNormWarps is RMSNorm on rms_norm's warp per row.
func (k *Kernels) rmsNormWarps(s *driver.Stream, what string, out, x, w driver.Ptr, rows, dim int, eps float32) error {
	const warps = 4
	return k.launch(s, "rms_norm", what, driver.Dim3{X: uint32(ceilDiv(rows, warps)), Y: 1, Z: 1}, driver.Dim3{X: 32 * warps, Y: 1, Z: 1}, 0,
		driver.P(out), driver.P(x), driver.P(w), driver.I(rows), driver.I(dim), driver.F(eps))
}

// checkBlock validates a quantisation block for the warp-group kernels.
func checkBlock(op string, n, block int) error {
	if block <= 0 || block > 32 || block&(block-1) != 0 || n%block != 0 {
		return fmt.Errorf("cuda %s: block %d must be a power of two <= 32 dividing %d elements", op, block, n)
	}
	return nil
}

// ActQuant is numfmt.ActQuant (e4m3, ue8m0 scales) over n elements: out
// (may alias x) = bf16(q·s); codes and scales (fp32 per block) may be 0.
func (k *Kernels) ActQuant(s *driver.Stream, what string, out, x, codes, scales driver.Ptr, n, block int) error {
	if err := checkBlock("act_quant", n, block); err != nil {
		return err
	}
	g, b := grid1(n)
	return k.launch(s, "act_quant", what, g, b, 0, driver.P(out), driver.P(x), driver.P(codes), driver.P(scales), driver.L(n), driver.I(block))
}

// FP4ActQuant is numfmt.FP4ActQuantE8M0 (e4m3Scales false) or
// FP4ActQuantE4M3 over n elements; packed (n/2 bytes) and scales may be 0.
func (k *Kernels) FP4ActQuant(s *driver.Stream, what string, out, x, packed, scales driver.Ptr, n, block int, e4m3Scales bool) error {
	if err := checkBlock("fp4_act_quant", n, block); err != nil {
		return err
	}
	if block < 2 {
		return fmt.Errorf("cuda fp4_act_quant: block %d must be even", block)
	}
	e4 := 0
	if e4m3Scales {
		e4 = 1
	}
	g, b := grid1(n)
	return k.launch(s, "fp4_act_quant", what, g, b, 0, driver.P(out), driver.P(x), driver.P(packed), driver.P(scales), driver.L(n), driver.I(block), driver.I(e4))
}

// gemmGrid is the tiling of matmul_fp8/fp4: 32 columns × 8 rows per block.
func gemmGrid(m, n int) (driver.Dim3, driver.Dim3) {
	return driver.Dim3{X: uint32(ceilDiv(n, 32)), Y: uint32(ceilDiv(m, 8)), Z: 1}, driver.Dim3{X: 32, Y: 8, Z: 1}
}

// gemvShared is the shared memory of gemv_splitk (one float per K block and
// column of a block), or 0 when k is too long for it (over 12288).
func gemvShared(kdim int) int {
	if b := ceilDiv(kdim, 32) * 32 * 4; b <= 48<<10 {
		return b
	}
	return 0
}

// gemvGrid is the launch of gemv_splitk: 32 columns a block, 8 warps over K.
func gemvGrid(n, rows int) (driver.Dim3, driver.Dim3) {
	return driver.Dim3{X: uint32(ceilDiv(n, 32)), Y: uint32(rows), Z: 1}, driver.Dim3{X: 256, Y: 1, Z: 1}
}

// blockScaled launches matmul_fp8/fp4: the decode kernel (gemv.cuh) for
// up to gemvMaxRows rows, the tiled one otherwise; both give the
// reference's bits.
func (k *Kernels) blockScaled(s *driver.Stream, fp4 bool, what string, out, a driver.Ptr, m, kdim int, w, wScale driver.Ptr, n int) error {
	name := map[bool]string{false: "matmul_fp8", true: "matmul_fp4"}[fp4]
	if ok, err := k.gemvMMA(s, fp4, what, out, a, m, kdim, w, wScale, n); ok || err != nil {
		return err
	}
	if ok, err := k.gemvBlockScaled(s, fp4, what, out, a, m, kdim, w, wScale, n); ok || err != nil {
		return err
	}
	g, b := gemmGrid(m, n)
	return k.launch(s, name, what, g, b, 0, driver.P(out), driver.P(a), driver.I(m), driver.I(kdim), driver.P(w), driver.P(wScale), driver.I(n))
}

// MatmulFP8 is kernels.MatmulFP8: out [m,n] = bf16(a [m,k] · dequant(w [n,k]
// e4m3, wScale [ceil(n/32), ceil(k/32)] e8m0)ᵀ).
func (k *Kernels) MatmulFP8(s *driver.Stream, what string, out, a driver.Ptr, m, kdim int, w, wScale driver.Ptr, n int) error {
	return k.blockScaled(s, false, what, out, a, m, kdim, w, wScale, n)
}

// MatmulFP4 is kernels.MatmulFP4: w packed e2m1 [n, k/2], wScale [n, ceil(k/32)].
func (k *Kernels) MatmulFP4(s *driver.Stream, what string, out, a driver.Ptr, m, kdim int, w, wScale driver.Ptr, n int) error {
	if kdim%2 != 0 {
		return fmt.Errorf("cuda matmul_fp4: k = %d is odd (fp4 packs two values per byte)", kdim)
	}
	return k.blockScaled(s, true, what, out, a, m, kdim, w, wScale, n)
}

// Routed describes a stack of expert weights in one device buffer: expert e
// at W + e·WStride bytes, its scales at Scale + e·ScaleStride.
type Routed struct {
	FP4                  bool
	W, Scale             driver.Ptr
	WStride, ScaleStride int
	Experts              int
}

// MatmulRouted computes rows q < rows of out [rows, n]: a[q/adiv] ·
// W_{ids[q]} (adiv = topk for the gate/up projections of a token's chosen
// experts, 1 for the down projection); ids (int64 [rows]) stay on the GPU,
// and only the chosen experts' bytes are read (gemv_routed in gemv.cuh).
// Each row equals MatmulFP4/FP8 with that expert's weights.
func (k *Kernels) MatmulRouted(s *driver.Stream, what string, out, a driver.Ptr, adiv, kdim int, r Routed, n int, ids driver.Ptr, rows int) error {
	if r.FP4 && kdim%2 != 0 {
		return fmt.Errorf("cuda routed matmul for %s: k = %d is odd (fp4 packs two values per byte)", what, kdim)
	}
	if ok, err := k.gemvMMARouted(s, what, out, a, adiv, kdim, r, Routed{}, n, ids, rows, 0, 0, 0); ok || err != nil {
		return err
	}
	return k.gemvRouted(s, what, out, a, adiv, kdim, r, n, ids, rows)
}

// SwiGLUClamp is kernels.SwiGLUClamp on g, u [rows, inter]; routeWeight
// (fp32 [rows]) may be 0.
func (k *Kernels) SwiGLUClamp(s *driver.Stream, what string, out, g, u driver.Ptr, rows, inter int, limit float32, routeWeight driver.Ptr) error {
	gr, b := grid1(rows * inter)
	return k.launch(s, "swiglu_clamp", what, gr, b, 0, driver.P(out), driver.P(g), driver.P(u), driver.L(rows*inter), driver.I(inter), driver.F(limit), driver.P(routeWeight))
}

// Rotary is kernels.Rotary in place on x [rows, width]: cosSin [maxPos,
// ropeDim/2, 2], pos int64 [rows].
func (k *Kernels) Rotary(s *driver.Stream, what string, x driver.Ptr, rows, width, ropeDim int, cosSin driver.Ptr, maxPos int, pos driver.Ptr, inverse bool) error {
	if ropeDim%2 != 0 || ropeDim > width {
		return fmt.Errorf("cuda rotary: rope dim %d must be even and <= width %d", ropeDim, width)
	}
	inv := 0
	if inverse {
		inv = 1
	}
	g, b := grid1(rows * ropeDim / 2)
	return k.launch(s, "rotary", what, g, b, 0, driver.P(x), driver.I(rows), driver.I(width), driver.I(ropeDim), driver.P(cosSin), driver.I(maxPos), driver.P(pos), driver.I(inv))
}

// RopeRows is the rope op in one launch (rope_rows): out = x [rows, width]
// with RoPE on the last ropeDim channels of each row, the others copied;
// row r's position is pos[(r / perT) % tLen]. out may be x.
func (k *Kernels) RopeRows(s *driver.Stream, what string, out, x driver.Ptr, rows, width, ropeDim int, cosSin driver.Ptr, maxPos int, pos driver.Ptr, perT, tLen int, inverse bool) error {
	if ropeDim%2 != 0 || ropeDim > width || (width-ropeDim)%2 != 0 || perT < 1 || tLen < 1 {
		return fmt.Errorf("cuda rope_rows: rope dim %d of width %d (both even, rope <= width), %d rows a position of %d", ropeDim, width, perT, tLen)
	}
	g, b := grid1(rows * width / 2)
	return k.launch(s, "rope_rows", what, g, b, 0, driver.P(out), driver.P(x), driver.I(rows), driver.I(width), driver.I(ropeDim), driver.P(cosSin),
		driver.I(maxPos), driver.P(pos), driver.I(perT), driver.I(tLen), driver.I(b2i(inverse)))
}

// EmbedBF16 gathers rows of a bf16 table [vocab, dim] for ids (int64 [n])
// into out [n, dim] (fp32). An id out of range poisons its row and sets
// *bad (int32, zeroed by the caller) to the largest bad index + 1.
func (k *Kernels) EmbedBF16(s *driver.Stream, what string, out, table driver.Ptr, vocab, dim int, ids driver.Ptr, n int, bad driver.Ptr) error {
	g, b := grid1(n * dim)
	return k.launch(s, "embed_bf16", what, g, b, 0, driver.P(out), driver.P(table), driver.I(vocab), driver.I(dim), driver.P(ids), driver.I(n), driver.P(bad))
}

// gateScores maps the score functions of kernels.Gate to gate_select's codes.
var gateScores = map[string]int{"sqrtsoftplus": 0, "sigmoid": 1, "softmax": 2}

// gate_hc.cuh's sizes: gate_logits' experts per block (GATE_EPB) and
// blockDim (GATE_THREADS), gate_select's blockDim (GATE_SELECT_THREADS).
const (
	gateEPB           = 2
	gateThreads       = 256
	gateSelectThreads = 512
)

// Gate is kernels.Gate for n tokens x [n, dim] and router weights w
// [experts, dim] (fp32): logits (scratch fp32 [n, experts]), then weights
// [n, topk] (fp32) and indices [n, topk] (int64 expert ids, on the GPU).
// bias may be 0. The logits' float64 sums run in a fixed tree (2 experts
// a block, 128 threads each); the scores, the selection and the weights
// are the reference's operations.
func (k *Kernels) Gate(s *driver.Stream, what string, weights, indices, logits, x driver.Ptr, n, dim int, w, bias driver.Ptr, experts, topk int, routeScale float32, scoreFunc string) error {
	score, ok := gateScores[scoreFunc]
	if !ok {
		return fmt.Errorf("cuda gate: unknown score function %q", scoreFunc)
	}
	if topk > experts || experts*8+topk*4 > 48<<10 {
		return fmt.Errorf("cuda gate: topk %d of %d experts is not supported", topk, experts)
	}
	err := k.launch(s, "gate_logits", what, driver.Dim3{X: uint32(n), Y: uint32(ceilDiv(experts, gateEPB)), Z: 1}, driver.Dim3{X: gateThreads, Y: 1, Z: 1}, 0,
		driver.P(logits), driver.P(x), driver.P(w), driver.I(n), driver.I(dim), driver.I(experts))
	if err != nil {
		return err
	}
	return k.launch(s, "gate_select", what, driver.Dim3{X: uint32(n), Y: 1, Z: 1}, driver.Dim3{X: gateSelectThreads, Y: 1, Z: 1}, experts*8+topk*4,
		driver.P(weights), driver.P(indices), driver.P(logits), driver.P(bias), driver.I(experts), driver.I(topk), driver.F(routeScale), driver.I(score))
}

// hcMax is the largest hc_mult hc_split_sinkhorn handles (its matrix lives
// in registers).
const hcMax = 8

// hcFastThreads is hc_mixes_fast's blockDim (gate_hc.cuh HCF_THREADS).
const hcFastThreads = 512

// HCMixes is kernels.HCMixes: h [tokens, hc, dim], fn [(2+hc)·hc, hc·dim],
// out [tokens, (2+hc)·hc]. hc_mixes_fast sums each dot in float64 in a
// fixed tree, a block per (token, mix) (within the golden reorder32
// tolerance of cpu-ref's ascending fp32 sums); Exact keeps hc_mixes, which
// replays them (one thread per mix, slow).
func (k *Kernels) HCMixes(s *driver.Stream, what string, out, h driver.Ptr, tokens, hc, dim int, fn driver.Ptr, eps float32) error {
	if mix := (2 + hc) * hc; !k.Exact {
		return k.launch(s, "hc_mixes_fast", what, driver.Dim3{X: uint32(tokens), Y: uint32(mix), Z: 1}, driver.Dim3{X: hcFastThreads, Y: 1, Z: 1}, 0,
			driver.P(out), driver.I(mix), driver.P(out+driver.Ptr(4*hc)), driver.I(mix), driver.P(out+driver.Ptr(8*hc)), driver.I(mix),
			driver.P(h), driver.I(hc*dim), driver.P(fn), driver.I(hc), driver.F(eps))
	}
	return k.launch(s, "hc_mixes", what, driver.Dim3{X: uint32(tokens), Y: 1, Z: 1}, driver.Dim3{X: 32, Y: 1, Z: 1}, 0,
		driver.P(out), driver.P(h), driver.I(tokens), driver.I(hc*dim), driver.P(fn), driver.I((2+hc)*hc), driver.F(eps))
}

// HCSplitSinkhorn is kernels.HCSplitSinkhorn (pre, post [tokens, hc], comb
// [tokens, hc, hc] from mixes [tokens, (2+hc)·hc]; scale [3], base [mix]).
func (k *Kernels) HCSplitSinkhorn(s *driver.Stream, what string, pre, post, comb, mixes driver.Ptr, tokens, hc int, scale, base driver.Ptr, iters int, eps float32) error {
	if hc < 1 || hc > hcMax || iters < 1 {
		return fmt.Errorf("cuda hc_split_sinkhorn: hc %d (1..%d) or iters %d (>= 1) not supported", hc, hcMax, iters)
	}
	if hc == 4 { // a warp per token (the same bits)
		g, b := grid1(32 * tokens)
		return k.launch(s, "hc_split_sinkhorn4", what, g, b, 0, driver.P(pre), driver.P(post), driver.P(comb), driver.P(mixes),
			driver.I(tokens), driver.P(scale), driver.P(base), driver.I(iters), driver.F(eps))
	}
	g, b := grid1(tokens)
	return k.launch(s, "hc_split_sinkhorn", what, g, b, 0, driver.P(pre), driver.P(post), driver.P(comb), driver.P(mixes),
		driver.I(tokens), driver.I(hc), driver.P(scale), driver.P(base), driver.I(iters), driver.F(eps))
}

// HCPre is kernels.HCPre: out [tokens, dim] from h [tokens, hc, dim] and pre.
func (k *Kernels) HCPre(s *driver.Stream, what string, out, h, pre driver.Ptr, tokens, hc, dim int) error {
	g, b := grid1(tokens * dim)
	return k.launch(s, "hc_pre", what, g, b, 0, driver.P(out), driver.P(h), driver.P(pre), driver.I(tokens), driver.I(hc), driver.I(dim))
}

// HCPost is kernels.HCPost: out [tokens, hc, dim] (not aliasing res).
func (k *Kernels) HCPost(s *driver.Stream, what string, out, y, res, post, comb driver.Ptr, tokens, hc, dim int) error {
	g, b := grid1(tokens * hc * dim)
	return k.launch(s, "hc_post", what, g, b, 0, driver.P(out), driver.P(y), driver.P(res), driver.P(post), driver.P(comb), driver.I(tokens), driver.I(hc), driver.I(dim))
}

// SparseAttn is kernels.SparseAttn: q [b,m,h,d], kv [b,n,d] then kv2
// [b,n2,d] (entries n.. of idx are kv2's rows; kv2 may be 0 with n2 = 0),
// sink [h], idx int32 [b,m,t], out [b,m,h,d]. Both kv tensors are read in
// place. One block of 512 threads (attention.cuh) takes hg heads of one
// (b, m), sharing each gathered kv row among them: the most heads (8, 4, 2
// dividing h) that still leave 2 blocks per SM of the H200, else one (a
// decode step: 64 blocks, one per head). Head dims up to 512 (d % 4 == 0)
// take the fast path, which stages each block of 64 kv rows in up to 160
// KiB of shared memory (its limit raised on first use). Its float64 sums
// give cpu-ref's bits with either kernel set.
//
// With scratch (SparseAttnScratch bytes, when that is not 0) a few query
// rows take the decode form instead: three launches that spread a row's
// blocks of entries over the GPU, with the same bits.
func (k *Kernels) SparseAttn(s *driver.Stream, what string, out, q driver.Ptr, b, m, h, d int, kv driver.Ptr, n int, kv2 driver.Ptr, n2 int,
	sink, idx driver.Ptr, t int, scale float32, scratch driver.Ptr) error {
	if d*4 > 48<<10 {
		return fmt.Errorf("cuda sparse_attn: head dim %d is too large", d)
	}
	fast := 0
	if d%4 == 0 && d <= 512 && kv%16 == 0 && kv2%16 == 0 {
		fast = 1
	}
	if g, bytes := sparseAttnSplit(b, m, h, d, t); bytes > 0 && scratch != 0 {
		if ok, err := k.sparseAttnSplit(s, what, out, q, b*m, m, h, d, kv, n, kv2, n2, sink, idx, t, scale, scratch, g, fast); ok || err != nil {
			return err
		}
	}
	const threads, fastShared = 512, (2*8*512 + 64*512) * 4
	var fn driver.Function
	if fast == 1 {
		fast = 0
		if f, err := k.tcFunc("sparse_attn", fastShared); err == nil {
			fn, fast = f, 1
		}
	}
	hg := 1
	for _, g := range []int{8, 4, 2} {
		if h%g == 0 && b*m*h/g >= 2*132 && (fast == 1 || g*d*4 <= 40<<10) {
			hg = g
			break
		}
	}
	shmem := hg * d * 4
	if fast == 1 {
		shmem = (2*hg*d + 64*d) * 4
	}
	grid, block := driver.Dim3{X: uint32(b * m * h / hg), Y: 1, Z: 1}, driver.Dim3{X: threads, Y: 1, Z: 1}
	args := []driver.Arg{driver.P(out), driver.P(q), driver.I(b), driver.I(m), driver.I(h), driver.I(d), driver.P(kv), driver.I(n),
		driver.P(kv2), driver.I(n2), driver.P(sink), driver.P(idx), driver.I(t), driver.F(scale), driver.I(hg), driver.I(fast)}
	if fast == 0 || grid.X == 0 {
		return k.launch(s, "sparse_attn", what, grid, block, shmem, args...)
	}
	return s.Launch(fn, grid, block, shmem, what, args...)
}

// SparseAttnScratch is the scratch SparseAttn's decode form needs for
// these shapes, 0 where it takes the one-kernel form.
func SparseAttnScratch(b, m, h, d, t int) int64 {
	_, bytes := sparseAttnSplit(b, m, h, d, t)
	return bytes
}

// sparseAttnSplit picks the decode form (attention.cuh: sparse_attn_logits,
// _blocks, _combine) for at most 16 query rows with two blocks of 64
// entries or more: its head group g (the most heads, 8, 4 or 2 dividing h,
// that still give 2 CTAs per SM of the H200 a step, else 1) and its scratch
// bytes (logits [u,h,t], per block α, Σp, μ', live [u,h,nb,4], P·V
// [u,h,nb,d], fp32; 0: not taken).
func sparseAttnSplit(b, m, h, d, t int) (g int, bytes int64) {
	u, nb := b*m, (t+63)/64
	if u < 1 || u > 16 || nb < 2 || h < 1 {
		return 0, 0
	}
	g = 1
	for _, c := range []int{8, 4, 2} {
		if h%c == 0 && u*(h/c)*nb >= 2*132 && c*d*4 <= 48<<10 {
			g = c
			break
		}
	}
	return g, 4 * int64(u*h) * int64(t+nb*4+nb*d)
}

// sparseAttnSplit launches the decode form; false (nothing launched) when
// the image lacks its kernels.
func (k *Kernels) sparseAttnSplit(s *driver.Stream, what string, out, q driver.Ptr, u, m, h, d int, kv driver.Ptr, n int, kv2 driver.Ptr, n2 int,
	sink, idx driver.Ptr, t int, scale float32, scratch driver.Ptr, g, fast int) (bool, error) {
	var fns [3]driver.Function
	for i, name := range []string{"sparse_attn_logits", "sparse_attn_blocks", "sparse_attn_combine"} {
		f, err := k.tcFunc(name, 0)
		if err != nil {
			return false, nil
		}
		fns[i] = f
	}
	nb := (t + 63) / 64
	sp := scratch
	blk := sp + driver.Ptr(4*u*h*t)
	pv := blk + driver.Ptr(4*u*h*nb*4)
	grid, block := driver.Dim3{X: uint32(u * h / g), Y: uint32(nb), Z: 1}, driver.Dim3{X: 256, Y: 1, Z: 1}
	if nb > maxGridYZ {
		return false, nil
	}
	if err := s.Launch(fns[0], grid, block, g*d*4, what, driver.P(sp), driver.P(q), driver.I(m), driver.I(h), driver.I(d),
		driver.P(kv), driver.I(n), driver.P(kv2), driver.I(n2), driver.P(idx), driver.I(t), driver.F(scale), driver.I(g), driver.I(fast)); err != nil {
		return true, err
	}
	if err := s.Launch(fns[1], grid, block, 0, what, driver.P(blk), driver.P(pv), driver.P(sp), driver.I(m), driver.I(h), driver.I(d),
		driver.P(kv), driver.I(n), driver.P(kv2), driver.I(n2), driver.P(idx), driver.I(t), driver.I(g)); err != nil {
		return true, err
	}
	return true, s.Launch(fns[2], driver.Dim3{X: uint32(u * h), Y: 1, Z: 1}, block, 0, what, driver.P(out), driver.P(blk), driver.P(pv),
		driver.P(sink), driver.I(h), driver.I(d), driver.I(nb))
}

// PlainFormat is how a weight of the plain products is stored.
type PlainFormat int

// The formats of Plain weights.
const (
	PlainF32  PlainFormat = iota // fp32 values
	PlainBF16                    // bf16 bits, 2 bytes a value
	PlainFP8                     // e4m3 codes with e8m0 32×32 block scales, widened to bf16 values first
)

// Plain is a weight [n, k] of the plain products (MatmulF32, GroupedLoRA).
type Plain struct {
	W, Scale driver.Ptr // Scale: PlainFP8 only
	Format   PlainFormat
}

// plain launches the decode kernel (gemv_plain in gemv.cuh) for up to
// gemvMaxRows rows, else matmul_f32w, matmul_bf16w or matmul_fp8w
// (gemm_plain in gemm.cuh); wZ is the weight offset of a group in elements
// (the groups of both kernels are consecutive blocks of n weight rows).
func (k *Kernels) plain(s *driver.Stream, what string, out, a driver.Ptr, m, kdim int, w Plain, n, lda, ldo, groups, aZ, wZ, oZ int, round, acts16 bool) error {
	if groups == 1 || wZ == n*kdim {
		if ok, err := k.gemvPlain(s, what, out, a, m, kdim, w, n, lda, ldo, groups, aZ, oZ, round); ok || err != nil {
			return err
		}
	}
	r := 0
	if round {
		r = 1
	}
	if acts16 && !k.Exact && (w.Format == PlainBF16 || w.Format == PlainFP8) && (groups == 1 || wZ == n*kdim) {
		// more rows than the decode kernels take, every operand a bf16
		// value: bf16 tensor cores (gemm_bf16.cuh)
		grid, block := driver.Dim3{X: uint32(ceilDiv(n, 128)), Y: uint32(ceilDiv(m, 128)), Z: uint32(groups)}, driver.Dim3{X: 256, Y: 1, Z: 1}
		if w.Format == PlainBF16 {
			return k.launch(s, "matmul_bf16w_tc", what, grid, block, 0, driver.P(out), driver.P(a), driver.I(m), driver.I(kdim), driver.P(w.W), driver.I(n),
				driver.I(lda), driver.I(ldo), driver.L(aZ), driver.L(oZ), driver.I(r))
		}
		return k.launch(s, "matmul_fp8w_tc", what, grid, block, 0, driver.P(out), driver.P(a), driver.I(m), driver.I(kdim), driver.P(w.W), driver.P(w.Scale), driver.I(n),
			driver.I(lda), driver.I(ldo), driver.L(aZ), driver.L(oZ), driver.I(r))
	}
	grid, block := driver.Dim3{X: uint32(ceilDiv(n, 32)), Y: uint32(ceilDiv(m, 8)), Z: uint32(groups)}, driver.Dim3{X: 32, Y: 8, Z: 1}
	head := []driver.Arg{driver.P(out), driver.P(a), driver.I(m), driver.I(kdim)}
	switch w.Format {
	case PlainF32, PlainBF16:
		name := map[PlainFormat]string{PlainF32: "matmul_f32w", PlainBF16: "matmul_bf16w"}[w.Format]
		return k.launch(s, name, what, grid, block, 0, append(head, driver.P(w.W), driver.I(n), driver.I(lda), driver.I(ldo),
			driver.L(aZ), driver.L(wZ), driver.L(oZ), driver.I(r))...)
	case PlainFP8:
		return k.launch(s, "matmul_fp8w", what, grid, block, 0, append(head, driver.P(w.W), driver.P(w.Scale), driver.I(n),
			driver.I(lda), driver.I(ldo), driver.L(aZ), driver.L(oZ), driver.I(r))...)
	}
	return fmt.Errorf("cuda matmul for %s: unknown weight format %d", what, w.Format)
}

// MatmulF32 is kernels.MatmulF32 (out fp32 [m,n], unrounded) and, with
// round, kernels.MatmulBF16 (out rounded to bf16): a [m,k], w [n,k].
// A rounded product is a bf16 op's, whose activations are bf16 values:
// with more rows than the decode kernels take it runs on bf16 tensor cores.
func (k *Kernels) MatmulF32(s *driver.Stream, what string, out, a driver.Ptr, m, kdim int, w Plain, n int, round bool) error {
	return k.plain(s, what, out, a, m, kdim, w, n, kdim, n, 1, 0, 0, 0, round, round)
}

// GroupedLoRA is kernels.GroupedLoRA: o [m, groups·dg], woA [groups·rank,
// dg], out [m, groups·rank] (bf16); acts16: o holds bf16 values (the op's
// input is bf16), which lets more rows than the decode kernels take run on
// bf16 tensor cores.
func (k *Kernels) GroupedLoRA(s *driver.Stream, what string, out, o driver.Ptr, m, groups, dg int, woA Plain, rank int, acts16 bool) error {
	return k.plain(s, what, out, o, m, dg, woA, rank, groups*dg, groups*rank, groups, dg, rank*dg, rank, true, acts16)
}

// IndexScore is kernels.IndexScore: q [b,s,h,di], k [b,nc,di], w [b,s,h],
// out [b,s,nc].
func (k *Kernels) IndexScore(st *driver.Stream, what string, out, q driver.Ptr, b, s, h, di int, kv driver.Ptr, nc int, w driver.Ptr) error {
	return k.launch(st, "index_score", what, driver.Dim3{X: uint32(ceilDiv(nc, 8)), Y: uint32(b * s), Z: 1}, driver.Dim3{X: 256, Y: 1, Z: 1}, 0,
		driver.P(out), driver.P(q), driver.I(s), driver.I(h), driver.I(di), driver.P(kv), driver.I(nc), driver.P(w))
}

// IndexCausalMask is kernels.IndexCausalMask on score [b,s,nc] (a no-op in
// decode, startPos > 0).
func (k *Kernels) IndexCausalMask(st *driver.Stream, what string, score driver.Ptr, b, s, nc, startPos, ratio int) error {
	if startPos != 0 {
		return nil
	}
	g, bl := grid1(b * s * nc)
	return k.launch(st, "index_causal_mask", what, g, bl, 0, driver.P(score), driver.I(b*s), driver.I(s), driver.I(nc), driver.I(ratio))
}

// ApplyCandidates is kernels.ApplyCandidates over n scores (mask: bytes).
func (k *Kernels) ApplyCandidates(st *driver.Stream, what string, score, mask driver.Ptr, n int) error {
	g, bl := grid1(n)
	return k.launch(st, "apply_candidates", what, g, bl, 0, driver.P(score), driver.P(mask), driver.L(n))
}

// IndexTopK is kernels.IndexTopK: score [rows, nc], out int32 [rows, k];
// lens int32 [nlens] (nlens divides rows; row r uses lens[r mod nlens]).
func (k *Kernels) IndexTopK(st *driver.Stream, what string, out, score driver.Ptr, rows, nc, kk int, lens driver.Ptr, nlens, offset int) error {
	if kk > nc || nlens <= 0 || rows%nlens != 0 {
		return fmt.Errorf("cuda index_topk: k %d of %d, %d lens for %d rows", kk, nc, nlens, rows)
	}
	return k.launch(st, "index_topk", what, driver.Dim3{X: uint32(rows), Y: 1, Z: 1}, driver.Dim3{X: 1024, Y: 1, Z: 1}, 0,
		driver.P(out), driver.P(score), driver.I(nc), driver.I(kk), driver.P(lens), driver.I(nlens), driver.I(offset))
}

// SelectCandidateBlocks is kernels.SelectCandidateBlocks: mask bytes [rows,
// wd] from logits [rows, wd]; lens as IndexTopK's.
func (k *Kernels) SelectCandidateBlocks(st *driver.Stream, what string, mask, logits driver.Ptr, rows, wd int, lens driver.Ptr, nlens, topkBlocks, blockSize int) error {
	nb := ceilDiv(wd, blockSize)
	if nb*4 > 48<<10 || nlens <= 0 || rows%nlens != 0 {
		return fmt.Errorf("cuda select_candidate_blocks: %d blocks, %d lens for %d rows", nb, nlens, rows)
	}
	return k.launch(st, "select_candidate_blocks", what, driver.Dim3{X: uint32(rows), Y: 1, Z: 1}, driver.Dim3{X: 1024, Y: 1, Z: 1}, nb*4,
		driver.P(mask), driver.P(logits), driver.I(wd), driver.P(lens), driver.I(nlens), driver.I(topkBlocks), driver.I(blockSize))
}

// poolMax is the largest compress ratio the pooling kernels take.
const poolMax = 16

// CompressorPool is kernels.CompressorPool: c, z [b, s, d] (fp32), state
// [b, ratio, d]; it returns the number of groups written per row (which the
// host knows without reading anything back).
func (k *Kernels) CompressorPool(st *driver.Stream, what string, out, c, z driver.Ptr, b, s, d, ratio int, kvState, scoreState driver.Ptr, startPos int) (int, error) {
	if ratio < 1 || ratio > poolMax {
		return 0, fmt.Errorf("cuda compressor pool: ratio %d not in 1..%d", ratio, poolMax)
	}
	if startPos == 0 {
		g, bl := grid1(b * s * d)
		return s / ratio, k.launch(st, "compressor_pool_prefill", what, g, bl, 0, driver.P(out), driver.P(c), driver.P(z),
			driver.I(b), driver.I(s), driver.I(d), driver.I(ratio), driver.P(kvState), driver.P(scoreState))
	}
	if s != 1 {
		return 0, fmt.Errorf("cuda compressor pool: decode takes one token, got %d", s)
	}
	g, bl := grid1(b * d)
	err := k.launch(st, "compressor_pool_decode", what, g, bl, 0, driver.P(out), driver.P(c), driver.P(z),
		driver.I(b), driver.I(d), driver.I(ratio), driver.P(kvState), driver.P(scoreState), driver.I(startPos))
	if (startPos+1)%ratio != 0 {
		return 0, err
	}
	return 1, err
}

// EngramTables are the hash constants of kernels.EngramHash on the device
// (int64): Mult [layers, ngram], Primes [layers, ngram-1, heads], Offsets
// [layers, (ngram-1)·heads].
type EngramTables struct {
	Mult, Primes, Offsets driver.Ptr
	Layers, Ngram, Heads  int
	Pad                   int64
}

// engramMaxNgram is the largest n-gram size engram_hash takes.
const engramMaxNgram = 8

// EngramHash is kernels.EngramHash: hist int64 [b, maxLen], out int64 [b, s,
// layers, (ngram-1)·heads].
func (k *Kernels) EngramHash(st *driver.Stream, what string, out, hist driver.Ptr, b, maxLen, s, startPos int, tb EngramTables) error {
	if tb.Ngram < 2 || tb.Ngram > engramMaxNgram {
		return fmt.Errorf("cuda engram hash: n-gram size %d not in 2..%d", tb.Ngram, engramMaxNgram)
	}
	g, bl := grid1(b * s)
	return k.launch(st, "engram_hash", what, g, bl, 0, driver.P(out), driver.P(hist), driver.I(b), driver.I(maxLen), driver.I(s), driver.I(startPos),
		driver.P(tb.Mult), driver.P(tb.Primes), driver.P(tb.Offsets), driver.I(tb.Layers), driver.I(tb.Ngram), driver.I(tb.Heads), driver.L(int(tb.Pad)))
}

// EngramLookup is kernels.EngramLookup: table e4m3 [numRows, width], scale
// e8m0 [numRows, width/32], rows int64 [n], out [n, width].
func (k *Kernels) EngramLookup(st *driver.Stream, what string, out, table, scale driver.Ptr, width, numRows int, rows driver.Ptr, n int) error {
	if width%32 != 0 {
		return fmt.Errorf("cuda engram lookup: width %d is not a multiple of 32", width)
	}
	g, bl := grid1(n * width)
	return k.launch(st, "engram_lookup", what, g, bl, 0, driver.P(out), driver.P(table), driver.P(scale), driver.I(width), driver.L(numRows), driver.P(rows), driver.I(n))
}

// EngramGate is kernels.EngramGate: h, key [tokens, hc, dim], value [tokens,
// dim], omega [hc, dim]; hOut may alias h.
func (k *Kernels) EngramGate(st *driver.Stream, what string, hOut, h driver.Ptr, tokens, hc, dim int, key, value, omega driver.Ptr, eps float32) error {
	const threads = 256 // ENGRAM_GATE_THREADS: a block per (token, copy)
	return k.launch(st, "engram_gate", what, driver.Dim3{X: uint32(tokens * hc), Y: 1, Z: 1}, driver.Dim3{X: threads, Y: 1, Z: 1}, 0,
		driver.P(hOut), driver.P(h), driver.I(tokens), driver.I(hc), driver.I(dim), driver.P(key), driver.P(value), driver.P(omega), driver.F(eps))
}
