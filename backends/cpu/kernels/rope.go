package kernels

import (
	"fmt"

	"github.com/ds4go/ds4/internal/numfmt"
)

// Rotary applies RoPE in place (spec §4.4, model.py apply_rotary_emb) to the
// last ropeDim channels of each of the `rows` rows of x [rows, width]. The
// rotated channels are viewed as ropeDim/2 complex numbers
// z_p = x[2p] + i·x[2p+1] (interleaved pairs, not half-split) and multiplied
// by f = cos + i·sin taken from cosSin [maxPos, ropeDim/2, 2] at position
// pos[row] (one position per row), or by its conjugate when inverse:
//
//	forward: re = fp32(a·c) − fp32(b·s),  im = fp32(a·s) + fp32(b·c)
//	inverse: re = fp32(a·c) + fp32(b·s),  im = fp32(b·c) − fp32(a·s)
//
// (a, b) = (x[2p], x[2p+1]), (c, s) the table entry; this is torch's complex64
// product of view_as_complex(x.float()) and freqs_cis (or freqs_cis.conj()),
// each product rounded to fp32, no fused multiply-add. The results are
// rounded to bf16 (the tensor's dtype) and written back; the other
// width−ropeDim channels are left untouched.
func Rotary(x []float32, rows int, width int, ropeDim int, cosSin []float32, pos []int, inverse bool) {
	if ropeDim%2 != 0 || ropeDim > width {
		panic(fmt.Sprintf("kernels.Rotary: ropeDim %d must be even and <= width %d", ropeDim, width))
	}
	gemmCheck("Rotary", len(x), rows*width, len(pos), rows)
	half := ropeDim / 2
	for r := range rows {
		p := pos[r]
		if p < 0 || (p+1)*ropeDim > len(cosSin) {
			panic(fmt.Sprintf("kernels.Rotary: position %d of row %d is outside the table (%d positions)", p, r, len(cosSin)/ropeDim))
		}
		f := cosSin[p*ropeDim : (p+1)*ropeDim]
		z := x[r*width+width-ropeDim : (r+1)*width]
		for k := range half {
			a, b := z[2*k], z[2*k+1]
			c, s := f[2*k], f[2*k+1]
			var re, im float32
			if inverse {
				re = float32(a*c) + float32(b*s)
				im = float32(b*c) - float32(a*s)
			} else {
				re = float32(a*c) - float32(b*s)
				im = float32(a*s) + float32(b*c)
			}
			z[2*k], z[2*k+1] = numfmt.BF16Round(re), numfmt.BF16Round(im)
		}
	}
}
