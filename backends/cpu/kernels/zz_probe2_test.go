package kernels

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"
)

func TestProbe2(t *testing.T) {
	raw, _ := os.ReadFile("/work/.device/3/all.bin")
	var idx map[string][2]int
	b, _ := os.ReadFile("/work/.device/3/idx.json")
	json.Unmarshal(b, &idx)
	get := func(n string) []float32 {
		o := idx[n]
		v := make([]float32, o[1])
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(o[0]+i):]))
		}
		return v
	}
	for _, n := range []int{64, 128, 512, 1000, 5120, 20480} {
		x := get(fmt.Sprintf("x%d", n))
		ms := get(fmt.Sprintf("ms%d", n))
		sm := get(fmt.Sprintf("sum%d", n))
		rows := len(x) / n
		for _, W := range []int{8} {
			bm, bs := 0, 0
			for r := range rows {
				xr := x[r*n : (r+1)*n]
				sq := make([]float32, n)
				for j, v := range xr {
					sq[j] = v * v
				}
				var s1, s2 float32
				if W == 0 {
					s1, s2 = elemTorchSum(sq), elemTorchSum(xr)
				} else {
					s1, s2 = elemTorchSum(sq), elemTorchSum(xr)
				}
				if s1/float32(n) != ms[r] {
					bm++
				}
				if s2 != sm[r] {
					bs++
				}
			}
			t.Logf("n=%d W=%d: meansq %d/%d differ, sum %d/%d differ", n, W, bm, rows, bs, rows)
		}
	}
	v := get("v")
	cnt := func(name string, f func(float32) float32, in []float32) {
		w := get(name)
		bad, worst := 0, 0.0
		for i, x := range in {
			g := f(x)
			if g != w[i] {
				bad++
				worst = max(worst, math.Abs(float64(g-w[i]))/math.Abs(float64(w[i])))
			}
		}
		t.Logf("%s: %d/%d differ, worst rel %g", name, bad, len(in), worst)
	}
	cnt("silu", elemSiLU, v)
	cnt("sigmoid", elemSigmoid, v)
	cnt("exp", elemExp, v)
	cnt("rsqrt", elemRsqrt, get("r"))
	s := get("s")
	out := make([]float32, len(s))
	Softmax(out, s, 1000, 37)
	w := get("softmax")
	bad := 0
	for i := range out {
		if out[i] != w[i] {
			bad++
		}
	}
	t.Logf("softmax: %d/%d differ", bad, len(out))
}
