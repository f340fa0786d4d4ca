// Package numfmt implements the number formats used by the DeepSeek-V4.1
// reference (spec §6): bfloat16 rounding, float8_e4m3fn, the e8m0 exponent
// scale format, the 4-bit e2m1 (fp4) format, IEEE half precision, and the
// activation fake-quantisers act_quant (§6.3) and fp4_act_quant (§6.4).
//
// All conversions are bit-exact with the PyTorch reference:
//
//   - BF16 rounding is round-to-nearest-even on the float32 bits; NaN stays a
//     (quiet) NaN.
//   - float8_e4m3fn: bias 7, no infinities, max 448, 0x7F/0xFF are NaN.
//     F32ToE4M3 rounds to nearest even and saturates to ±448 (satfinite),
//     keeps the sign of zero and maps NaN to 0x7F.
//   - e8m0: byte v means 2^(v-127), 0xFF is NaN.
//   - e2m1: 4-bit code, bit 3 = sign, magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6;
//     ties go to the even code (0.25→0, 0.75→1, 1.25→1, 1.75→2, 2.5→2,
//     3.5→4, 5→4).
//
// The activation quantisers compute exactly as the reference kernels: the
// power-of-two scales are derived from the float32 bits of amax·fp32(1/max)
// (exponent plus one if the mantissa is non-zero), the quotient x/s is a
// float32 division, and the in-place result is bf16(q·s).
package numfmt
