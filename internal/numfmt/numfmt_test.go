package numfmt

import (
	"math"
	"math/rand/v2"
	"testing"
)

func f32(b uint32) float32 { return math.Float32frombits(b) }

func isNaN32(f float32) bool { return f != f }

func TestBF16(t *testing.T) {
	cases := []struct{ in, want uint32 }{
		{0x3f800000, 0x3f800000}, // 1
		{0x3f808000, 0x3f800000}, // tie, even below
		{0x3f818000, 0x3f820000}, // tie, even above
		{0x3f808001, 0x3f810000}, // above tie
		{0x3f807fff, 0x3f800000}, // below tie
		{0x80000000, 0x80000000}, // -0
		{0x00000001, 0x00000000}, // tiny subnormal rounds to 0
		{0x00008000, 0x00000000}, // subnormal tie to even (0)
		{0x00018000, 0x00020000}, // subnormal tie to even (up)
		{0x7f7fffff, 0x7f800000}, // max float32 overflows to +Inf
		{0x7f800000, 0x7f800000}, // +Inf
		{0xff800000, 0xff800000}, // -Inf
	}
	for _, c := range cases {
		got := math.Float32bits(BF16Round(f32(c.in)))
		if got != c.want {
			t.Errorf("BF16Round(%#08x) = %#08x, want %#08x", c.in, got, c.want)
		}
		if BF16Bits(f32(c.in)) != uint16(c.want>>16) {
			t.Errorf("BF16Bits(%#08x) = %#04x", c.in, BF16Bits(f32(c.in)))
		}
	}
	for _, nan := range []uint32{0x7fc00000, 0x7f800001, 0xff800001, 0x7f80ffff, 0x7fffffff} {
		b := BF16Bits(f32(nan))
		if !isNaN32(BF16FromBits(b)) || b&0x0040 == 0 || (b>>15) != uint16(nan>>31) {
			t.Errorf("BF16Bits(NaN %#08x) = %#04x, want a quiet NaN of the same sign", nan, b)
		}
	}
	// Every bf16 value is a fixed point.
	for b := range 1 << 16 {
		f := BF16FromBits(uint16(b))
		if isNaN32(f) {
			continue
		}
		if BF16Bits(f) != uint16(b) {
			t.Fatalf("bf16 %#04x not a fixed point", b)
		}
	}
	x := []float32{1, f32(0x3f808001), -2.5}
	BF16RoundSlice(x)
	if x[0] != 1 || math.Float32bits(x[1]) != 0x3f810000 || x[2] != -2.5 {
		t.Errorf("BF16RoundSlice = %v", x)
	}
}

func TestF16(t *testing.T) {
	for _, c := range []struct {
		f float32
		b uint16
	}{{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {float32(math.Ldexp(1, -24)), 0x0001}, {0, 0}} {
		if got := F32ToF16(c.f); got != c.b {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.f, got, c.b)
		}
		if got := F16ToF32(c.b); got != c.f {
			t.Errorf("F16ToF32(%#04x) = %g, want %g", c.b, got, c.f)
		}
	}
}

func TestE4M3Table(t *testing.T) {
	known := map[byte]float32{
		0x00: 0, 0x01: 1.0 / 512, 0x07: 7.0 / 512, 0x08: 1.0 / 64, 0x38: 1, 0x39: 1.125,
		0x40: 2, 0x7e: 448, 0x7d: 416, 0xb8: -1, 0xfe: -448,
	}
	for b, want := range known {
		if got := E4M3ToF32(b); got != want {
			t.Errorf("E4M3ToF32(%#02x) = %g, want %g", b, got, want)
		}
	}
	if !math.Signbit(float64(E4M3ToF32(0x80))) || E4M3ToF32(0x80) != 0 {
		t.Error("0x80 is not -0")
	}
	for b := range 256 {
		c := byte(b)
		v := E4M3ToF32(c)
		if c&0x7f == 0x7f {
			if !isNaN32(v) {
				t.Errorf("%#02x should be NaN", c)
			}
			if F32ToE4M3(v) != 0x7f {
				t.Errorf("F32ToE4M3(NaN) = %#02x", F32ToE4M3(v))
			}
			continue
		}
		if got := F32ToE4M3(v); got != c {
			t.Errorf("round trip %#02x -> %g -> %#02x", c, v, got)
		}
		// Values are strictly increasing in the code within a sign.
		if c&0x7f > 0 && math.Abs(float64(E4M3ToF32(c-1))) >= math.Abs(float64(v)) {
			t.Errorf("table not monotone at %#02x", c)
		}
	}
}

// bruteE4M3 is the reference: nearest finite e4m3 value, ties to the even
// code, saturating.
func bruteE4M3(f float32) byte {
	if isNaN32(f) {
		return 0x7f
	}
	sign := byte(0)
	if math.Signbit(float64(f)) {
		sign = 0x80
	}
	a := math.Abs(float64(f))
	best, bestD := byte(0), math.Inf(1)
	for c := range byte(0x7f) { // 0..0x7e
		d := math.Abs(a - float64(E4M3ToF32(c)))
		if d < bestD || (d == bestD && c&1 == 0) {
			best, bestD = c, d
		}
	}
	return sign | best
}

func TestF32ToE4M3(t *testing.T) {
	cases := []struct {
		in   float32
		want byte
	}{
		{448, 0x7e}, {449, 0x7e}, {464, 0x7e}, {480, 0x7e}, {1e30, 0x7e},
		{float32(math.Inf(1)), 0x7e}, {float32(math.Inf(-1)), 0xfe}, {-1000, 0xfe},
		{float32(math.NaN()), 0x7f},
		{float32(math.Copysign(0, -1)), 0x80}, {0, 0},
		{float32(math.Ldexp(1, -10)), 0x00},  // tie between 0 and 2^-9 -> 0
		{-float32(math.Ldexp(1, -10)), 0x80}, // sign kept on underflow
		{float32(math.Ldexp(3, -10)), 0x02},  // tie between codes 1 and 2 -> 2
		{float32(math.Ldexp(15, -10)), 0x08}, // tie between 7/512 and 8/512 -> 0x08
		{1.0625, 0x38},                       // tie 1 / 1.125 -> even 1
		{1.1875, 0x3a},                       // tie 1.125 / 1.25 -> 1.25
		{1.9375, 0x40},                       // tie 1.875 / 2 -> 2 (exponent carry)
		{432, 0x7e},                          // tie 416 / 448 -> 448 (even code 0x7e)
		{240, 0x77},
	}
	for _, c := range cases {
		if got := F32ToE4M3(c.in); got != c.want {
			t.Errorf("F32ToE4M3(%g) = %#02x, want %#02x", c.in, got, c.want)
		}
	}
	// Midpoints and their neighbours against the brute-force reference.
	for c := byte(0); c < 0x7e; c++ {
		lo, hi := E4M3ToF32(c), E4M3ToF32(c+1)
		mid := (lo + hi) / 2 // exact in fp32
		for _, v := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1000), lo, hi} {
			for _, s := range []float32{v, -v} {
				if got, want := F32ToE4M3(s), bruteE4M3(s); got != want {
					t.Errorf("F32ToE4M3(%g) = %#02x, want %#02x", s, got, want)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		v := float32(math.Ldexp(r.Float64()*2-1, r.IntN(24)-14))
		if got, want := F32ToE4M3(v), bruteE4M3(v); got != want {
			t.Fatalf("F32ToE4M3(%g) = %#02x, want %#02x", v, got, want)
		}
	}
}

func TestE8M0(t *testing.T) {
	if E8M0ToF32(127) != 1 || E8M0ToF32(128) != 2 || E8M0ToF32(120) != 1.0/128 {
		t.Error("E8M0ToF32 basic values")
	}
	if E8M0ToF32(0) != float32(math.Ldexp(1, -127)) || E8M0ToF32(0) == 0 {
		t.Error("E8M0ToF32(0) should be 2^-127 (fp32 subnormal)")
	}
	if E8M0ToF32(254) != float32(math.Ldexp(1, 127)) {
		t.Error("E8M0ToF32(254)")
	}
	if !isNaN32(E8M0ToF32(255)) || F32ToE8M0(float32(math.NaN())) != 255 {
		t.Error("e8m0 NaN")
	}
	for b := range 255 {
		if got := F32ToE8M0(E8M0ToF32(byte(b))); got != byte(b) {
			t.Errorf("e8m0 round trip %d -> %d", b, got)
		}
	}
}

func TestE2M1(t *testing.T) {
	mags := []float32{0, .5, 1, 1.5, 2, 3, 4, 6}
	for code := range byte(16) {
		want := mags[code&7]
		if code&8 != 0 {
			want = -want
		}
		v := E2M1ToF32(code)
		if v != want || math.Signbit(float64(v)) != (code&8 != 0) {
			t.Errorf("E2M1ToF32(%d) = %g, want %g", code, v, want)
		}
		if got := F32ToE2M1(v); got != code {
			t.Errorf("round trip code %d -> %g -> %d", code, v, got)
		}
	}
	// Ties (spec §6.4) go to the even code.
	ties := map[float32]float32{0.25: 0, 0.75: 1, 1.25: 1, 1.75: 2, 2.5: 2, 3.5: 4, 5: 4}
	for in, want := range ties {
		for _, s := range []float32{1, -1} {
			if got := E2M1ToF32(F32ToE2M1(s * in)); got != s*want {
				t.Errorf("e2m1(%g) = %g, want %g", s*in, got, s*want)
			}
			if c := F32ToE2M1(s * in); c&1 != 0 && c&7 != 7 {
				t.Errorf("tie %g -> odd code %d", s*in, c)
			}
			// Just above / below a tie.
			up := math.Nextafter32(in, 10)
			dn := math.Nextafter32(in, 0)
			if F32ToE2M1(s*up)&7 != F32ToE2M1(s*dn)&7+1 {
				t.Errorf("around %g: codes %d, %d", s*in, F32ToE2M1(s*dn), F32ToE2M1(s*up))
			}
		}
	}
	neg0 := float32(math.Copysign(0, -1))
	if F32ToE2M1(neg0) != 8 || F32ToE2M1(-0.1) != 8 || F32ToE2M1(0.1) != 0 {
		t.Error("e2m1 sign of zero")
	}
	if F32ToE2M1(6) != 7 || F32ToE2M1(-6) != 15 || F32ToE2M1(100) != 7 {
		t.Error("e2m1 max")
	}
	// Brute force: nearest, ties to even code.
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		v := float32(r.Float64()*12 - 6)
		a := math.Abs(float64(v))
		best, bestD := byte(0), math.Inf(1)
		for c := range byte(8) {
			d := math.Abs(a - float64(mags[c]))
			if d < bestD || (d == bestD && c&1 == 0) {
				best, bestD = c, d
			}
		}
		if v < 0 {
			best |= 8
		}
		if got := F32ToE2M1(v); got != best {
			t.Fatalf("F32ToE2M1(%g) = %d, want %d", v, got, best)
		}
	}
}

func TestActQuantEdges(t *testing.T) {
	neg0 := float32(math.Copysign(0, -1))
	x := make([]float32, 64)
	x[1] = neg0
	x[32] = 1000 // s = 2^ceil(log2(1000/448)) = 4 -> 250 -> e4m3 256
	x[33] = -3
	x[34] = neg0
	codes := make([]byte, 64)
	scales := make([]float32, 2)
	ActQuant(x, 32, codes, scales)
	// Zero block: a = 1e-4, 1e-4*(1/448) ~ 2^-22.1 -> s = 2^-22.
	if scales[0] != float32(math.Ldexp(1, -22)) {
		t.Errorf("zero block scale = %g", scales[0])
	}
	if codes[0] != 0 || codes[1] != 0x80 || !math.Signbit(float64(x[1])) || x[1] != 0 {
		t.Errorf("-0 not kept: code %#02x, out %g", codes[1], x[1])
	}
	if scales[1] != 4 || x[32] != 1024 || codes[32] != F32ToE4M3(256) || x[33] != -3 || codes[34] != 0x80 {
		t.Errorf("block 1: scale %g out %v codes %x", scales[1], x[32:35], codes[32:35])
	}
	y := []float32{0, 0, 0, 0}
	ActQuantInplace(y, 2)
	for _, v := range y {
		if v != 0 {
			t.Error("zeros changed")
		}
	}
}

func TestFP4Edges(t *testing.T) {
	x := make([]float32, 32)
	scales := make([]float32, 2)
	packed := make([]byte, 16)
	x[0] = float32(math.Copysign(0, -1))
	x[1] = 3
	x[16] = 0
	FP4ActQuantE4M3(x, 16, packed, scales)
	// Zero-ish block: a = 3 -> s = e4m3(0.5) = 0.5 -> 3/0.5 = 6 -> code 7.
	if scales[0] != 0.5 || packed[0] != 0x78 || x[1] != 3 || !math.Signbit(float64(x[0])) {
		t.Errorf("block 0: scale %g packed %#02x x %v", scales[0], packed[0], x[:2])
	}
	// All-zero block keeps the floor scale 2^-9 (e4m3 code 0x01).
	if scales[1] != float32(math.Ldexp(1, -9)) {
		t.Errorf("zero block scale %g", scales[1])
	}

	z := make([]float32, 32)
	sc := make([]float32, 1)
	FP4ActQuantE8M0(z, 32, nil, sc)
	if sc[0] != float32(math.Ldexp(1, -126)) {
		t.Errorf("zero block e8m0 scale %g, want 2^-126", sc[0])
	}
	w := make([]float32, 32)
	w[0], w[1], w[2] = 6, 5, -0.75 // s = 1: 5 -> 4 (tie to even), -0.75 -> -1
	pk := make([]byte, 16)
	FP4ActQuantE8M0(w, 32, pk, sc)
	if sc[0] != 1 || w[0] != 6 || w[1] != 4 || w[2] != -1 || pk[0] != 0x67 || pk[1] != 0x0a {
		t.Errorf("e8m0 block: s %g w %v packed %x", sc[0], w[:3], pk[:2])
	}
}

func TestBadBlockPanics(t *testing.T) {
	for name, fn := range map[string]func(){
		"act":  func() { ActQuantInplace(make([]float32, 33), 32) },
		"e8m0": func() { FP4ActQuantE8M0(make([]float32, 33), 32, nil, nil) },
		"e4m3": func() { FP4ActQuantE4M3(make([]float32, 15), 16, nil, nil) },
		"zero": func() { ActQuantInplace(make([]float32, 4), 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			fn()
		}()
	}
}

// TestActQuantFastBits checks the fast in-place block of ActQuant against
// the reference element loop, bit for bit, on random, tiny, huge, tie and
// special values.
func TestActQuantFastBits(t *testing.T) {
	ref := func(x []float32, block int) {
		const inv = float32(1.0 / 448)
		for bi := 0; bi*block < len(x); bi++ {
			xb := x[bi*block : (bi+1)*block]
			s := CeilPow2(max(absMax(xb), float32(1e-4)) * inv)
			for i, v := range xb {
				xb[i] = BF16Round(E4M3ToF32(F32ToE4M3(clamp(v/s, -E4M3Max, E4M3Max))) * s)
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 1e-38, 1e-4, 448, 464, 480, -1.0 / 64, 1.0 / 128}
	for iter := range 4000 {
		x := make([]float32, 64)
		scale := math.Ldexp(1, r.IntN(200)-100)
		for i := range x {
			switch r.IntN(10) {
			case 0:
				x[i] = specials[r.IntN(len(specials))]
			case 1:
				// a tie of the e4m3 grid relative to a power of two
				x[i] = float32(math.Ldexp(float64(17+2*r.IntN(8)), r.IntN(40)-30))
			default:
				x[i] = float32(r.NormFloat64() * scale)
			}
			if iter%3 == 0 && r.IntN(4) == 0 {
				x[i] *= 1e-3
			}
			x[i] = BF16Round(x[i])
		}
		want := append([]float32(nil), x...)
		ref(want, 32)
		ActQuantInplace(x, 32)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(want[i]) {
				t.Fatalf("iter %d elem %d: got %08x want %08x", iter, i, math.Float32bits(x[i]), math.Float32bits(want[i]))
			}
		}
	}
}
