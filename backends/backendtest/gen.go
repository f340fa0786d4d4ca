package backendtest

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/internal/numfmt"
	"github.com/ds4go/ds4/ir"
)

// Input generators. Every case draws fresh values from the run's seed;
// quantised weights are made as the checkpoint stores them (golden README):
// N(0, 1/√in) values quantised to e4m3 with e8m0 32×32 block scales (fp8),
// to e2m1 packed two per byte, low nibble first, with e8m0 scales per row per
// 32 along K (fp4), or to e4m3 with e8m0 scales per row per 32 (fp8row).

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// floats returns a float tensor of dtype dt with normal values of deviation
// sd, rounded to dt (bf16 values are kept exactly in F32).
func floats(r *rand.Rand, dt ir.DType, sd float64, shape ...int) *backends.Tensor {
	t := &backends.Tensor{DType: dt, Shape: shape, F32: make([]float32, numel(shape))}
	for i := range t.F32 {
		t.F32[i] = float32(r.NormFloat64() * sd)
	}
	roundTo(dt, t.F32)
	return t
}

// uniform returns a float tensor with values uniform in [lo, hi), rounded to dt.
func uniform(r *rand.Rand, dt ir.DType, lo, hi float64, shape ...int) *backends.Tensor {
	t := &backends.Tensor{DType: dt, Shape: shape, F32: make([]float32, numel(shape))}
	for i := range t.F32 {
		t.F32[i] = float32(lo + (hi-lo)*r.Float64())
	}
	roundTo(dt, t.F32)
	return t
}

func roundTo(dt ir.DType, x []float32) {
	switch dt {
	case ir.BF16:
		numfmt.BF16RoundSlice(x)
	case ir.F16:
		for i, v := range x {
			x[i] = numfmt.F16ToF32(numfmt.F32ToF16(v))
		}
	}
}

// actQuanted is a bf16 activation already fake-quantised to fp8 with block
// 32, as every input of the quantised products is in the model.
func actQuanted(r *rand.Rand, sd float64, shape ...int) *backends.Tensor {
	t := floats(r, ir.BF16, sd, shape...)
	numfmt.ActQuantInplace(t.F32, 32)
	return t
}

func ints(vals []int64, shape ...int) *backends.Tensor {
	return &backends.Tensor{DType: ir.I64, Shape: shape, I64: vals}
}

func scalar(v int64) *backends.Tensor { return ints([]int64{v}) }

// randInts returns n values uniform in [0, hi).
func randInts(r *rand.Rand, n int, hi int64) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = r.Int64N(hi)
	}
	return v
}

// distinctRows returns rows×k values, each row k distinct values of [0, hi).
func distinctRows(r *rand.Rand, rows, k int, hi int64) []int64 {
	v := make([]int64, 0, rows*k)
	for range rows {
		for _, p := range r.Perm(int(hi))[:k] {
			v = append(v, int64(p))
		}
	}
	return v
}

// mask returns a u8 tensor with about frac of its elements 1.
func mask(r *rand.Rand, frac float64, shape ...int) *backends.Tensor {
	t := &backends.Tensor{DType: ir.U8, Shape: shape, U8: make([]byte, numel(shape))}
	for i := range t.U8 {
		if r.Float64() < frac {
			t.U8[i] = 1
		}
	}
	return t
}

// Quantised weights. Codes are drawn from a pool of quantised normal
// samples (N(0,1) scaled to use most of the format's range, rounded as the
// checkpoint's quantiser rounds), so that their distribution is the
// stored one's — zeros, subnormals and both signs included — without
// quantising every element (released-width matrices have millions).
var (
	e4m3Pool = quantPool(func(z float64) byte { return numfmt.F32ToE4M3(float32(z * 448 / 4)) })
	e2m1Pool = quantPool(func(z float64) byte { return numfmt.F32ToE2M1(float32(min(max(z*2, -6), 6))) })
)

func quantPool(q func(z float64) byte) [4096]byte {
	var p [4096]byte
	r := rand.New(rand.NewPCG(1, 2))
	for i := range p {
		p[i] = q(r.NormFloat64())
	}
	return p
}

// codes fills dst with pool entries chosen by random bits.
func codes(r *rand.Rand, dst []byte, pool *[4096]byte) {
	for i := 0; i < len(dst); i += 5 {
		u := r.Uint64()
		for j := i; j < min(i+5, len(dst)); j++ {
			dst[j] = pool[u&4095]
			u >>= 12
		}
	}
}

// scales fills dst with e8m0 scales near 2^e0 (e0 ± 1), so that weights
// have a deviation near 1/√in as the golden checkpoints' N(0, 1/√in).
func scales(r *rand.Rand, dst []byte, e0 int) {
	for i := range dst {
		dst[i] = byte(127 + e0 + r.IntN(3) - 1)
	}
}

// log2Dev is the e8m0 exponent that gives codes of deviation codeSD a
// deviation near 1/√in.
func log2Dev(in int, codeSD float64) int {
	return int(math.Round(math.Log2(1 / (codeSD * math.Sqrt(float64(in))))))
}

// fp8Weight is an fp8 matrix [out,in] as stored: e4m3 codes and e8m0
// scales per 32×32 block ([ceil(out/32), ceil(in/32)]).
func fp8Weight(r *rand.Rand, out, in int) *backends.HostWeight {
	w := &backends.HostWeight{DType: ir.F8E4M3, Shape: []int{out, in}, Format: "fp8", Stored: "F8_E4M3",
		Data: make([]byte, out*in), Scale: make([]byte, ((out+31)/32)*((in+31)/32))}
	codes(r, w.Data, &e4m3Pool)
	scales(r, w.Scale, log2Dev(in, 112))
	return w
}

// fp8RowWeight is an fp8row table [rows,width] as stored: e4m3 codes and
// e8m0 scales per row per 32 columns; values of deviation about 1.
func fp8RowWeight(r *rand.Rand, rows, width int) *backends.HostWeight {
	w := &backends.HostWeight{DType: ir.F8E4M3, Shape: []int{rows, width}, Format: "fp8row", Stored: "F8_E4M3",
		Data: make([]byte, rows*width), Scale: make([]byte, rows*((width+31)/32))}
	codes(r, w.Data, &e4m3Pool)
	scales(r, w.Scale, log2Dev(1, 112))
	return w
}

// fp4Weight is an fp4 matrix [out,in] as stored: e2m1 codes packed two per
// byte along in (low nibble first) and e8m0 scales per row per 32 along in.
func fp4Weight(r *rand.Rand, out, in int) *backends.HostWeight {
	w := &backends.HostWeight{DType: ir.FP4E2M1, Shape: []int{out, in}, Format: "fp4", Stored: "I8",
		Data: make([]byte, out*in/2), Scale: make([]byte, out*in/32)}
	nib := make([]byte, out*in)
	codes(r, nib, &e2m1Pool)
	for i := range w.Data {
		w.Data[i] = nib[2*i]&15 | nib[2*i+1]<<4
	}
	scales(r, w.Scale, log2Dev(in, 2))
	return w
}

// expertStack is E quantised experts [O,K] in the stored format of dt, one
// weight per expert in Parts (only the chosen ones are read).
func expertStack(r *rand.Rand, dt ir.DType, e, o, k int) *backends.HostWeight {
	w := &backends.HostWeight{DType: dt, Shape: []int{e, o, k}, Format: "fp8"}
	if dt == ir.FP4E2M1 {
		w.Format = "fp4"
	}
	for range e {
		if dt == ir.FP4E2M1 {
			w.Parts = append(w.Parts, fp4Weight(r, o, k))
		} else {
			w.Parts = append(w.Parts, fp8Weight(r, o, k))
		}
	}
	return w
}

// floatWeight is a float weight of the graph's dtype dt stored as stored
// (BF16 or F32 bytes); the values are those of t rounded to stored.
func floatWeight(t *backends.Tensor, format string, dt ir.DType, stored string) *backends.HostWeight {
	w := &backends.HostWeight{DType: dt, Shape: t.Shape, Format: format, Stored: stored}
	switch stored {
	case "BF16":
		w.Data = make([]byte, 2*len(t.F32))
		for i, v := range t.F32 {
			binary.LittleEndian.PutUint16(w.Data[2*i:], numfmt.BF16Bits(v))
		}
	default:
		w.Data = make([]byte, 4*len(t.F32))
		for i, v := range t.F32 {
			binary.LittleEndian.PutUint32(w.Data[4*i:], math.Float32bits(v))
		}
	}
	return w
}

// intWeight is an i64 weight (the Engram token map).
func intWeight(v []int64, shape ...int) *backends.HostWeight {
	w := &backends.HostWeight{DType: ir.I64, Shape: shape, Format: "i64", Stored: "I64", Data: make([]byte, 8*len(v))}
	for i, x := range v {
		binary.LittleEndian.PutUint64(w.Data[8*i:], uint64(x))
	}
	return w
}
