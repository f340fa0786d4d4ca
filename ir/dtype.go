package ir

import "fmt"

// DType is the element type of a value. Floating activations whose dtype is
// BF16 or F16 are held by the CPU backend as float32 values that are exactly
// representable in that format; the dtype says where rounding happens.
type DType uint8

// The element types of the IR.
const (
	Invalid DType = iota
	F32
	BF16
	F16
	F8E4M3  // float8_e4m3fn: bias 7, no infinities, max 448
	E8M0    // unsigned exponent-only scale: 2^(v-127), 0xFF = NaN
	FP4E2M1 // 4-bit float, bit 3 = sign, magnitudes 0 .5 1 1.5 2 3 4 6
	I8
	U8
	I32
	I64
	Bool
)

var dtypeNames = [...]string{
	Invalid: "invalid", F32: "f32", BF16: "bf16", F16: "f16", F8E4M3: "f8e4m3",
	E8M0: "e8m0", FP4E2M1: "fp4e2m1", I8: "i8", U8: "u8", I32: "i32", I64: "i64", Bool: "bool",
}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", d)
}

// ParseDType maps a dtype name back to its value.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if n == s && i != 0 {
			return DType(i), nil
		}
	}
	return Invalid, fmt.Errorf("unknown dtype %q", s)
}

// IsFloat reports whether values of d are floating point activations.
func (d DType) IsFloat() bool { return d == F32 || d == BF16 || d == F16 }

// IsInt reports whether d is an integer or boolean type.
func (d DType) IsInt() bool { return d == I8 || d == U8 || d == I32 || d == I64 || d == Bool }

// Bits is the storage width of one element in bits.
func (d DType) Bits() int {
	switch d {
	case F32, I32:
		return 32
	case BF16, F16:
		return 16
	case F8E4M3, E8M0, I8, U8, Bool:
		return 8
	case FP4E2M1:
		return 4
	case I64:
		return 64
	}
	return 0
}
