package deepseekv4

import "math"

// This file reproduces glibc's single-precision sinf/cosf (glibc >= 2.28,
// sysdeps/ieee754/flt-32/s_sinf.c, s_cosf.c, s_sincosf.h; worst-case error
// 0.56 ulp). PyTorch evaluates torch.polar on the CPU with std::cos/std::sin
// of float, i.e. these functions, so using them makes the RoPE tables
// bit-identical to the reference; a correctly rounded cos/sin differs in
// about 1% of the entries by one ulp. On x86-64 glibc selects its FMA build
// (ifunc) on CPUs with FMA, where every a*b+c of the C source is contracted;
// glibcFMA selects that variant.

type sincosfTable struct {
	sign               [4]float64
	hpiInv, hpi        float64
	c0, c1, c2, c3, c4 float64
	s1, s2, s3         float64
}

var sincosfTables = [2]sincosfTable{
	{
		sign:   [4]float64{1.0, -1.0, -1.0, 1.0},
		hpiInv: 0x1.45F306DC9C883p+23, hpi: 0x1.921FB54442D18p0,
		c0: 0x1p0, c1: -0x1.ffffffd0c621cp-2, c2: 0x1.55553e1068f19p-5, c3: -0x1.6c087e89a359dp-10, c4: 0x1.99343027bf8c3p-16,
		s1: -0x1.555545995a603p-3, s2: 0x1.1107605230bc4p-7, s3: -0x1.994eb3774cf24p-13,
	},
	{
		sign:   [4]float64{1.0, -1.0, -1.0, 1.0},
		hpiInv: 0x1.45F306DC9C883p+23, hpi: 0x1.921FB54442D18p0,
		c0: -0x1p0, c1: 0x1.ffffffd0c621cp-2, c2: -0x1.55553e1068f19p-5, c3: 0x1.6c087e89a359dp-10, c4: -0x1.99343027bf8c3p-16,
		s1: -0x1.555545995a603p-3, s2: 0x1.1107605230bc4p-7, s3: -0x1.994eb3774cf24p-13,
	},
}

// invPio4 is 4/PI to 192 bits, 8 new bits per entry.
var invPio4 = [24]uint32{
	0xa2, 0xa2f9, 0xa2f983, 0xa2f9836e,
	0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
	0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1,
	0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
	0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599,
	0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041,
}

const (
	sincosfPi63 = 0x1.921FB54442D18p-62
	sincosfPio4 = 0x1.921FB54442D18p-1
)

// glibcFMA selects glibc's FMA build (the one x86-64 CPUs with FMA run).
// Both builds reproduce every golden table bit for bit; they can differ in
// rare last-ulp cases, so the FMA build, which produced the goldens on the
// x86-64 reference machines, is used.
const glibcFMA = true

// madd is a*b+c as glibc computes it: fused in the FMA build, else two
// roundings (the float64 conversion stops Go from fusing).
func madd(a, b, c float64) float64 {
	if glibcFMA {
		return math.FMA(a, b, c)
	}
	return float64(a*b) + c
}

func abstop12(x float32) uint32 { return (math.Float32bits(x) >> 20) & 0x7ff }

func reduceFast(x float64, p *sincosfTable) (float64, int) {
	r := x * p.hpiInv
	n := int((int32(r) + 0x800000) >> 24)
	return madd(-float64(n), p.hpi, x), n
}

func reduceLarge(xi uint32) (float64, int) {
	arr := invPio4[(xi>>26)&15:]
	shift := (xi >> 23) & 7
	xi = (xi & 0xffffff) | 0x800000
	xi <<= shift
	res0 := uint64(xi * arr[0])
	res1 := uint64(xi) * uint64(arr[4])
	res2 := uint64(xi) * uint64(arr[8])
	res0 = (res2 >> 32) | (res0 << 32)
	res0 += res1
	n := (res0 + (1 << 61)) >> 62
	res0 -= n << 62
	return float64(int64(res0)) * sincosfPi63, int(n)
}

func sinfPoly(x, x2 float64, p *sincosfTable, n int) float32 {
	if n&1 == 0 {
		x3 := x * x2
		s1 := madd(x2, p.s3, p.s2)
		x7 := x3 * x2
		s := madd(x3, p.s1, x)
		return float32(madd(x7, s1, s))
	}
	x4 := x2 * x2
	c2 := madd(x2, p.c4, p.c3)
	c1 := madd(x2, p.c1, p.c0)
	x6 := x4 * x2
	c := madd(x4, p.c2, c1)
	return float32(madd(x6, c2, c))
}

func sinfGlibc(y float32) float32 {
	x := float64(y)
	p := &sincosfTables[0]
	switch {
	case abstop12(y) < abstop12(float32(sincosfPio4)):
		if abstop12(y) < abstop12(0x1p-12) {
			return y
		}
		return sinfPoly(x, x*x, p, 0)
	case abstop12(y) < abstop12(120.0):
		x, n := reduceFast(x, p)
		s := p.sign[n&3]
		if n&2 != 0 {
			p = &sincosfTables[1]
		}
		return sinfPoly(x*s, x*x, p, n)
	case abstop12(y) < abstop12(float32(math.Inf(1))):
		xi := math.Float32bits(y)
		sign := int(xi >> 31)
		x, n := reduceLarge(xi)
		s := p.sign[(n+sign)&3]
		if (n+sign)&2 != 0 {
			p = &sincosfTables[1]
		}
		return sinfPoly(x*s, x*x, p, n)
	}
	return float32(math.NaN())
}

func cosfGlibc(y float32) float32 {
	x := float64(y)
	p := &sincosfTables[0]
	switch {
	case abstop12(y) < abstop12(float32(sincosfPio4)):
		if abstop12(y) < abstop12(0x1p-12) {
			return 1
		}
		return sinfPoly(x, x*x, p, 1)
	case abstop12(y) < abstop12(120.0):
		x, n := reduceFast(x, p)
		s := p.sign[n&3]
		if n&2 != 0 {
			p = &sincosfTables[1]
		}
		return sinfPoly(x*s, x*x, p, n^1)
	case abstop12(y) < abstop12(float32(math.Inf(1))):
		xi := math.Float32bits(y)
		sign := int(xi >> 31)
		x, n := reduceLarge(xi)
		s := p.sign[(n+sign)&3]
		if (n+sign)&2 != 0 {
			p = &sincosfTables[1]
		}
		return sinfPoly(x*s, x*x, p, n^1)
	}
	return float32(math.NaN())
}
