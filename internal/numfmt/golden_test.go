package numfmt_test

import (
	"math"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/internal/safetensors"
)

func opsFile(t *testing.T) *safetensors.File {
	t.Helper()
	_, me, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(me), "..", "..", "testdata", "tiny", "ops.safetensors")
	f, err := safetensors.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func get(t *testing.T, f *safetensors.File, name, dtype string) *safetensors.Tensor {
	t.Helper()
	ts, ok := f.Get(name)
	if !ok {
		t.Fatalf("%s missing", name)
	}
	if ts.DType != dtype {
		t.Fatalf("%s: dtype %s, want %s", name, ts.DType, dtype)
	}
	return ts
}

func f32s(t *testing.T, ts *safetensors.Tensor) []float32 {
	t.Helper()
	v, err := ts.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g (%#08x), want %g (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d/%d elements differ", what, bad, len(got))
	}
}

func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if got[i] != want[i] {
			if bad < 5 {
				t.Errorf("%s[%d] = %#02x, want %#02x", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d/%d bytes differ", what, bad, len(got))
	}
}

func TestActQuantGolden(t *testing.T) {
	f := opsFile(t)
	x := f32s(t, get(t, f, "act_quant.x", "F32"))
	wantQ := get(t, f, "act_quant.q", "F8_E4M3").Data
	wantS := get(t, f, "act_quant.scale", "F8_E8M0").Data
	wantSF := f32s(t, get(t, f, "act_quant.scale_f32", "F32"))
	wantOut := f32s(t, get(t, f, "act_quant.inplace_out", "F32"))
	for i, v := range x {
		if numfmt.BF16Round(v) != v {
			t.Fatalf("x[%d] = %g is not bf16", i, v)
		}
	}
	codes := make([]byte, len(x))
	scales := make([]float32, len(x)/32)
	y := append([]float32(nil), x...)
	numfmt.ActQuant(y, 32, codes, scales)
	sameBytes(t, "q", codes, wantQ)
	sameBits(t, "scale_f32", scales, wantSF)
	sb := make([]byte, len(scales))
	for i, s := range scales {
		sb[i] = numfmt.F32ToE8M0(s)
	}
	sameBytes(t, "scale", sb, wantS)
	sameBits(t, "inplace_out", y, wantOut)

	z := append([]float32(nil), x...)
	numfmt.ActQuantInplace(z, 32)
	sameBits(t, "ActQuantInplace", z, wantOut)
}

func TestFP4ActQuantE8M0Golden(t *testing.T) {
	f := opsFile(t)
	p := "fp4_act_quant_e8m0_b32."
	x := f32s(t, get(t, f, p+"x", "F32"))
	wantP := get(t, f, p+"packed", "U8").Data
	wantS := get(t, f, p+"scale", "F8_E8M0").Data
	wantSF := f32s(t, get(t, f, p+"scale_f32", "F32"))
	wantOut := f32s(t, get(t, f, p+"inplace_out", "F32"))
	packed := make([]byte, len(x)/2)
	scales := make([]float32, len(x)/32)
	y := append([]float32(nil), x...)
	numfmt.FP4ActQuantE8M0(y, 32, packed, scales)
	sameBytes(t, "packed", packed, wantP)
	sameBits(t, "scale_f32", scales, wantSF)
	sb := make([]byte, len(scales))
	for i, s := range scales {
		sb[i] = numfmt.F32ToE8M0(s)
	}
	sameBytes(t, "scale", sb, wantS)
	sameBits(t, "inplace_out", y, wantOut)

	z := append([]float32(nil), x...)
	numfmt.FP4ActQuantE8M0(z, 32, nil, nil)
	sameBits(t, "inplace_out (nil outputs)", z, wantOut)
}

func TestFP4ActQuantE4M3Golden(t *testing.T) {
	f := opsFile(t)
	p := "fp4_act_quant_e4m3_b16."
	x := f32s(t, get(t, f, p+"x", "F32"))
	wantP := get(t, f, p+"packed", "U8").Data
	wantS := get(t, f, p+"scale", "F8_E4M3").Data
	wantSF := f32s(t, get(t, f, p+"scale_f32", "F32"))
	wantOut := f32s(t, get(t, f, p+"inplace_out", "F32"))
	packed := make([]byte, len(x)/2)
	scales := make([]float32, len(x)/16)
	y := append([]float32(nil), x...)
	numfmt.FP4ActQuantE4M3(y, 16, packed, scales)
	sameBytes(t, "packed", packed, wantP)
	sameBits(t, "scale_f32", scales, wantSF)
	sb := make([]byte, len(scales))
	for i, s := range scales {
		sb[i] = numfmt.F32ToE4M3(s)
	}
	sameBytes(t, "scale", sb, wantS)
	sameBits(t, "inplace_out", y, wantOut)

	z := append([]float32(nil), x...)
	numfmt.FP4ActQuantE4M3(z, 16, nil, nil)
	sameBits(t, "inplace_out (nil outputs)", z, wantOut)
}
