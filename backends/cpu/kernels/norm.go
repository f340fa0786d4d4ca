package kernels

import "github.com/ds4go/ds4/internal/numfmt"

// RMSNorm is the reference RMSNorm (spec §4.2, model.py RMSNorm.forward) over
// the last axis of x [rows, dim] with weight w [dim] (bf16 values):
//
//	v   = (Σ_j fp32(x_j²)) / dim             (fp32; the sum in torch's CPU order, see MeanSquare)
//	r   = 1 / sqrt(v + eps)                  (fp32 add, fp32 sqrt, fp32 division: torch.rsqrt)
//	out = bf16( w_j · fp32(x_j · r) )        (two fp32 products, one rounding to bf16)
//
// eps is norm_eps (1e-20 in every DeepSeek-V4.1 instance; a zero row gives
// inf·0 = NaN there, as in the reference). out may alias x.
func RMSNorm(out, x []float32, rows, dim int, w []float32, eps float32) {
	gemmCheck("RMSNorm", len(out), rows*dim, len(x), rows*dim, len(w), dim)
	parallelRange(rows, 1, rows*dim*4, func(r0, r1 int) {
		ms := make([]float32, 1)
		for r := r0; r < r1; r++ {
			xr := x[r*dim : (r+1)*dim]
			MeanSquare(ms, xr, 1, dim)
			rs := elemRsqrt(ms[0] + eps)
			or := out[r*dim : (r+1)*dim]
			for j, v := range xr {
				or[j] = numfmt.BF16Round(w[j] * float32(v*rs))
			}
		}
	})
}
