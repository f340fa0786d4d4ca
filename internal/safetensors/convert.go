package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ds4go/ds4/internal/numfmt"
)

func (t *Tensor) errf(format string, args ...any) error {
	return &Error{File: t.File, Tensor: t.Name, Offset: -1, Msg: fmt.Sprintf(format, args...)}
}

// Float32s converts the tensor to float32 values. Floating dtypes (F32, F64
// rounded, BF16, F16, F8_E4M3, F8_E8M0) are decoded; integer dtypes (I8, U8,
// I16, I32, I64, BOOL) are converted as values.
func (t *Tensor) Float32s() ([]float32, error) {
	d := t.Data
	le := binary.LittleEndian
	n := t.NumElements()
	out := make([]float32, n)
	switch t.DType {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(d[4*i:]))
		}
	case F64:
		for i := range out {
			out[i] = float32(math.Float64frombits(le.Uint64(d[8*i:])))
		}
	case BF16:
		for i := range out {
			out[i] = numfmt.BF16FromBits(le.Uint16(d[2*i:]))
		}
	case F16:
		for i := range out {
			out[i] = numfmt.F16ToF32(le.Uint16(d[2*i:]))
		}
	case F8E4M3:
		for i := range out {
			out[i] = numfmt.E4M3ToF32(d[i])
		}
	case F8E8M0:
		for i := range out {
			out[i] = numfmt.E8M0ToF32(d[i])
		}
	default:
		v, err := t.Int64s()
		if err != nil {
			return nil, t.errf("cannot convert %s to float32", t.DType)
		}
		for i, x := range v {
			out[i] = float32(x)
		}
	}
	return out, nil
}

// Int64s converts an integer tensor (I64, I32, I16, I8, U8, BOOL) to int64.
func (t *Tensor) Int64s() ([]int64, error) {
	d := t.Data
	le := binary.LittleEndian
	out := make([]int64, t.NumElements())
	switch t.DType {
	case I64:
		for i := range out {
			out[i] = int64(le.Uint64(d[8*i:]))
		}
	case I32:
		for i := range out {
			out[i] = int64(int32(le.Uint32(d[4*i:])))
		}
	case I16:
		for i := range out {
			out[i] = int64(int16(le.Uint16(d[2*i:])))
		}
	case I8:
		for i := range out {
			out[i] = int64(int8(d[i]))
		}
	case U8, BOOL:
		for i := range out {
			out[i] = int64(d[i])
		}
	default:
		return nil, t.errf("cannot convert %s to int64", t.DType)
	}
	return out, nil
}

// Int32s converts an integer tensor to int32; I64 values out of range are
// an error.
func (t *Tensor) Int32s() ([]int32, error) {
	v, err := t.Int64s()
	if err != nil {
		return nil, t.errf("cannot convert %s to int32", t.DType)
	}
	out := make([]int32, len(v))
	for i, x := range v {
		if x < math.MinInt32 || x > math.MaxInt32 {
			return nil, t.errf("element %d = %d does not fit in int32", i, x)
		}
		out[i] = int32(x)
	}
	return out, nil
}
