package kernels

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"testing"
)

func TestProbe3(t *testing.T) {
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
	s := get("s")
	w := get("softmax")
	for mode := range 4 {
		bad, worst := 0, 0.0
		for r := range 1000 {
			x := s[r*37 : (r+1)*37]
			mx := float32(math.Inf(-1))
			for _, v := range x {
				mx = max(mx, v)
			}
			e := make([]float32, 37)
			for j, v := range x {
				e[j] = elemExp(v - mx)
			}
			var sum float32
			if mode&2 != 0 {
				sum = probeCascade(e, 8)
			} else {
				sum = elemTorchSum(e)
			}
			for j := range e {
				var o float32
				if mode&1 != 0 {
					o = e[j] * (1 / sum)
				} else {
					o = e[j] / sum
				}
				if o != w[r*37+j] {
					bad++
					worst = max(worst, math.Abs(float64(o-w[r*37+j]))/float64(w[r*37+j]))
				}
			}
		}
		t.Logf("mode %d: %d differ worst %g", mode, bad, worst)
	}
}
