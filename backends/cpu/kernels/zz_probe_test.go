package kernels

import (
	"fmt"
	"testing"

	"github.com/ds4go/ds4/internal/numfmt"
)

func probeCascade(x []float32, W int) float32 {
	n := len(x)
	vecSize := n / W
	const ilp = 4
	// vectors: vec i lane l = x[i*W+l]
	sizeIlp := vecSize / ilp
	lp := 4
	cl := 0
	for (1 << cl) < sizeIlp {
		cl++
	}
	if cl/4 > lp {
		lp = cl / 4
	}
	step := 1 << lp
	mask := step - 1
	acc := make([][][]float32, 4)
	for j := range acc {
		acc[j] = make([][]float32, ilp)
		for k := range acc[j] {
			acc[j][k] = make([]float32, W)
		}
	}
	add := func(dst []float32, vi int) {
		for l := range W {
			dst[l] += x[vi*W+l]
		}
	}
	i := 0
	for i+step <= sizeIlp {
		for j := 0; j < step; j, i = j+1, i+1 {
			for k := range ilp {
				add(acc[0][k], i*ilp+k)
			}
		}
		for j := 1; j < 4; j++ {
			for k := range ilp {
				for l := range W {
					acc[j][k][l] += acc[j-1][k][l]
					acc[j-1][k][l] = 0
				}
			}
			if i&(mask<<(j*lp)) != 0 {
				break
			}
		}
	}
	for ; i < sizeIlp; i++ {
		for k := range ilp {
			add(acc[0][k], i*ilp+k)
		}
	}
	for j := 1; j < 4; j++ {
		for k := range ilp {
			for l := range W {
				acc[0][k][l] += acc[j][k][l]
			}
		}
	}
	p := acc[0]
	for i := sizeIlp * ilp; i < vecSize; i++ {
		add(p[0], i)
	}
	for k := 1; k < ilp; k++ {
		for l := range W {
			p[0][l] += p[k][l]
		}
	}
	var f float32
	for k := vecSize * W; k < n; k++ {
		f += x[k]
	}
	for l := range W {
		f += p[0][l]
	}
	return f
}

func TestProbe(t *testing.T) {
	g := gemmOpen(t, "golden.safetensors")
	ck := hcTestCkpt(t)
	for _, W := range []int{0, 8, 16} {
		bad, tot := 0, 0
		for ph := -1; ph < 12; ph++ {
			name := "prefill"
			if ph >= 0 {
				name = fmt.Sprintf("decode%02d", ph)
			}
			for l := range 8 {
				p := fmt.Sprintf("%s.L%d.", name, l)
				h := hcTestBlockInput(t, g, name, l, len(gemmF32(t, g, p+"attn_in"))/128)
				want := gemmF32(t, g, p+"attn_in")
				tokens := len(want) / 128
				x := make([]float32, tokens*128)
				HCPre(x, h, gemmF32(t, g, p+"pre_in"), tokens, 4, 128)
				w := gemmF32(t, ck, fmt.Sprintf("layers.%d.attn_norm.weight", l))
				for r := range tokens {
					xr := x[r*128 : (r+1)*128]
					sq := make([]float32, 128)
					for j, v := range xr {
						sq[j] = float32(v * v)
					}
					var s float32
					if W == 0 {
						s = elemTorchSum(sq)
					} else {
						s = probeCascade(sq, W)
					}
					rs := elemRsqrt(s/128 + 1e-20)
					for j, v := range xr {
						o := numfmt.BF16Round(w[j] * float32(v*rs))
						tot++
						if o != want[r*128+j] {
							bad++
						}
					}
				}
			}
		}
		t.Logf("W=%d: %d/%d differ", W, bad, tot)
	}
}
