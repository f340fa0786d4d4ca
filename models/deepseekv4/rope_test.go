package deepseekv4

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// compareRope checks that a table is bit-identical to a golden [seq, pairs, 2]
// tensor and returns the number of elements that are not.
func compareRope(t *testing.T, name string, got *RopeTable, want []float32, shape []int) int {
	t.Helper()
	if !reflect.DeepEqual(shape, []int{got.SeqLen, got.Pairs, 2}) {
		t.Fatalf("%s: golden shape %v, table [%d %d 2]", name, shape, got.SeqLen, got.Pairs)
	}
	diff, worst := 0, 0.0
	for i, w := range want {
		g := got.CosSin[i]
		if g != w {
			diff++
		}
		worst = math.Max(worst, math.Abs(float64(g)-float64(w)))
	}
	if diff != 0 {
		t.Errorf("%s: %d/%d elements not bit-identical (max abs diff %g)", name, diff, len(want), worst)
	}
	return diff
}

func TestFreqsCisOps(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(tinyDir, "ops.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ops map[string]json.RawMessage
	if err := json.Unmarshal(raw, &ops); err != nil {
		t.Fatal(err)
	}
	f := openGolden(t, "ops.safetensors")
	n := 0
	for key, val := range ops {
		name, ok := strings.CutSuffix(key, ".args(dim,seqlen,original_seq_len,base,factor,beta_fast,beta_slow)")
		if !ok {
			continue
		}
		var a []float64
		if err := json.Unmarshal(val, &a); err != nil || len(a) != 7 {
			t.Fatalf("%s: bad args %s", key, val)
		}
		got := FreqsCis(int(a[0]), int(a[1]), int(a[2]), a[3], a[4], a[5], a[6])
		want, shape := goldenFloat32s(t, f, name)
		compareRope(t, name, got, want, shape)
		n++
	}
	if n != 5 {
		t.Errorf("found %d freqs_cis cases in ops.json, want 5", n)
	}
}

func TestRopeTableTinyGolden(t *testing.T) {
	c := loadTiny(t)
	f := openGolden(t, "golden.safetensors")
	const maxSeqLen = 64 // README: runtime max_seq_len
	for _, tc := range []struct {
		name  string
		layer int
	}{{"rope.freqs_cis_window_layers", 0}, {"rope.freqs_cis_compressed_layers", 2}} {
		want, shape := goldenFloat32s(t, f, tc.name)
		compareRope(t, tc.name, c.RopeTable(tc.layer, maxSeqLen), want, shape)
	}
}

func TestRopeParams(t *testing.T) {
	c := loadRelease(t)
	if p := c.RopeParams(0); p.Base != 10000 || p.OriginalSeqLen != 0 || p.Dim != 64 {
		t.Errorf("layer 0: %+v", p)
	}
	if p := c.RopeParams(2); p.Base != 160000 || p.OriginalSeqLen != 65536 || p.Factor != 16 {
		t.Errorf("layer 2: %+v", p)
	}
	if p := c.RopeParams(41); p.Base != 10000 || p.OriginalSeqLen != 0 {
		t.Errorf("MTP layer 41: %+v", p)
	}
	// Spec §4.4: correction range [15, 25] for base 160000; Appendix A YaRN factors.
	if lo, hi := yarnCorrectionRange(32, 1, 64, 160000, 65536); lo != 15 || hi != 25 {
		t.Errorf("correction range %d %d", lo, hi)
	}
	plain := RopeFreqs(64, 0, 160000, 16, 32, 1)
	yarn := RopeFreqs(64, 65536, 160000, 16, 32, 1)
	for i := range plain {
		want := 1.0
		switch {
		case i >= 25:
			want = 1.0 / 16
		case i > 15:
			want = 1 - 0.9375*float64(i-15)/10
		}
		if r := float64(yarn[i]) / float64(plain[i]); math.Abs(r-want) > 1e-6 {
			t.Errorf("pair %d: YaRN factor %g, want %g", i, r, want)
		}
	}
}

// TestSincosfGlibc checks the glibc port against float64 sin/cos (within
// 0.5607 ulp, glibc's bound) over both reduction paths.
func TestSincosfGlibc(t *testing.T) {
	check := func(y float32) {
		for k, got := range []float32{sinfGlibc(y), cosfGlibc(y)} {
			exact := math.Sin(float64(y))
			if k == 1 {
				exact = math.Cos(float64(y))
			}
			ulp := float64(math.Nextafter32(float32(math.Abs(exact)), 2) - float32(math.Abs(exact)))
			if e := math.Abs(float64(got)-exact) / ulp; e > 0.57 {
				t.Fatalf("%s(%v) = %v, exact %v: %.3f ulp", []string{"sin", "cos"}[k], y, got, exact, e)
			}
		}
	}
	for y := float32(-200); y < 200; y += 0.0137 {
		check(y)
	}
	for _, y := range []float32{0, 1e-5, -1e-5, 0.7853, 0.7854, 119.99, 120, 120.01, 1e3, 65535, 1048575, -1048575, 3e7} {
		check(y)
	}
	for pos := float32(0); pos < 1<<20; pos += 997 {
		check(pos * 0.9)
	}
}
