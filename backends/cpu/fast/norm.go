package fast

import (
	"math"

	"github.com/ds4go/ds4/backends/cpu/kernels"
	"github.com/ds4go/ds4/internal/numfmt"
)

// MeanSquare is kernels.MeanSquare, bit for bit: the squares in vectors and
// torch's cascade sum (kernels.TorchSum) with its row additions in vectors.
func MeanSquare(out, x []float32, rows, n int) {
	ks := current()
	if ks.squares == nil || ks.addRows32 == nil || n < 8 {
		kernels.MeanSquare(out, x, rows, n)
		return
	}
	check("MeanSquare", len(out), rows, len(x), rows*n)
	sb := getBuf(n + kernels.TorchSumScratch)
	defer putBuf(sb)
	for r := range rows {
		out[r] = meanSquare(ks, (*sb)[:n+kernels.TorchSumScratch], x[r*n:(r+1)*n])
	}
}

// meanSquare is one row of MeanSquare; sq is scratch of len(x) +
// kernels.TorchSumScratch.
func meanSquare(ks *kernelSet, sq, x []float32) float32 {
	sq, accs := sq[:len(x)], sq[len(x):]
	n8 := len(x) &^ 7
	ks.squares(sq[:n8], x[:n8])
	for j := n8; j < len(x); j++ {
		sq[j] = float32(x[j] * x[j])
	}
	return kernels.TorchSumInto(sq, ks.addRows32, accs) / float32(len(x))
}

// RMSNorm is kernels.RMSNorm, bit for bit (meanSquare, then the output
// step bf16(w·(x·rs)) in vectors); rows are spread over the cores.
func RMSNorm(out, x []float32, rows, dim int, w []float32, eps float32) {
	ks := current()
	if ks.squares == nil || ks.addRows32 == nil || ks.rmsOut == nil || dim < 8 {
		kernels.RMSNorm(out, x, rows, dim, w, eps)
		return
	}
	check("RMSNorm", len(out), rows*dim, len(x), rows*dim, len(w), dim)
	per := max(1, 16384/dim) // rows per task
	parallel(ceilDiv(rows, per), func(c int) {
		sb := getBuf(dim + kernels.TorchSumScratch)
		defer putBuf(sb)
		for r := c * per; r < min(rows, (c+1)*per); r++ {
			xr, or := x[r*dim:(r+1)*dim], out[r*dim:(r+1)*dim]
			rs := 1 / float32(math.Sqrt(float64(meanSquare(ks, (*sb)[:dim+kernels.TorchSumScratch], xr)+eps))) // kernels' elemRsqrt
			d8 := dim &^ 7
			ks.rmsOut(or[:d8], xr[:d8], w[:d8], rs)
			for j := d8; j < dim; j++ {
				or[j] = numfmt.BF16Round(w[j] * float32(xr[j]*rs))
			}
		}
	})
}
