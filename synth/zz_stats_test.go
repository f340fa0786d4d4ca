package synth

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"testing"

	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/internal/safetensors"
)

func TestZZStats(t *testing.T) {
	s, err := safetensors.OpenDir("../testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`\.\d+\.`)
	seen := map[string]bool{}
	names := s.Names()
	sort.Strings(names)
	for _, n := range names {
		k := re.ReplaceAllString(n, ".N.")
		tt, _ := s.Get(n)
		if seen[k] && !(k == n) {
			continue
		}
		seen[k] = true
		var v []float32
		switch tt.DType {
		case "F8_E4M3":
			for _, b := range tt.Data {
				v = append(v, numfmt.E4M3ToF32(b))
			}
		case "F8_E8M0":
			for _, b := range tt.Data {
				v = append(v, float32(b))
			}
		case "I8":
			for _, b := range tt.Data {
				v = append(v, numfmt.E2M1ToF32(b&15), numfmt.E2M1ToF32(b>>4))
			}
		default:
			v, _ = tt.Float32s()
		}
		var mean, sq, mx float64
		mn := math.Inf(1)
		for _, x := range v {
			mean += float64(x)
			sq += float64(x) * float64(x)
			mx = math.Max(mx, float64(x))
			mn = math.Min(mn, float64(x))
		}
		mean /= float64(len(v))
		fmt.Printf("%-45s %-8s %v mean %.4g rms %.4g min %.4g max %.4g\n", k, tt.DType, tt.Shape, mean, math.Sqrt(sq/float64(len(v))), mn, mx)
	}
}
