package synth

import (
	"encoding/binary"
	"math"

	"github.com/ds4go/ds4/internal/numfmt"
)

// splitmix is SplitMix64's output function, used to derive seeds.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// rng is xorshift64*: fast, and good enough for synthetic weights.
type rng struct{ s uint64 }

func newRNG(seed uint64) *rng {
	s := splitmix(seed)
	if s == 0 {
		s = 1
	}
	return &rng{s}
}

func (r *rng) next() uint64 {
	r.s ^= r.s >> 12
	r.s ^= r.s << 25
	r.s ^= r.s >> 27
	return r.s * 0x2545f4914f6cdd1d
}

// normals fills x with mean + std·z, z standard normal, taken from a
// 4096-entry inverse-CDF table (|z| <= 3.5; small enough to stay in L1),
// five draws per 64-bit random number.
func (r *rng) normals(x []float32, mean, std float32) {
	const m = uint64(len(normTab) - 1)
	i := 0
	for ; i+5 <= len(x); i += 5 {
		u := r.next()
		x[i] = mean + std*normTab[u&m]
		x[i+1] = mean + std*normTab[u>>12&m]
		x[i+2] = mean + std*normTab[u>>24&m]
		x[i+3] = mean + std*normTab[u>>36&m]
		x[i+4] = mean + std*normTab[u>>48&m]
	}
	if i < len(x) {
		u := r.next()
		for ; i < len(x); i++ {
			x[i] = mean + std*normTab[u&m]
			u >>= 12
		}
	}
}

var (
	normTab [1 << 12]float32
	// e4m3Tab and e2m1Tab map the top 13 bits of a float32 (sign, exponent,
	// 4 mantissa bits) to the code of that interval's midpoint; values
	// beyond the format's range saturate (no NaN codes).
	e4m3Tab [1 << 13]byte
	e2m1Tab [1 << 13]byte
)

func init() {
	for i := range normTab {
		p := (float64(i) + 0.5) / float64(len(normTab))
		normTab[i] = float32(math.Sqrt2 * math.Erfinv(2*p-1))
	}
	for k := range e4m3Tab {
		bits := uint32(k)<<19 | 1<<18
		f := math.Float32frombits(bits)
		if bits&0x7f800000 == 0x7f800000 { // inf/NaN exponent: saturate
			f = math.Float32frombits(bits&0x80000000 | math.Float32bits(numfmt.E4M3Max))
		}
		e4m3Tab[k] = numfmt.F32ToE4M3(f)
		e2m1Tab[k] = numfmt.F32ToE2M1(max(min(f, 6), -6))
	}
}

// pow2Scale returns the e8m0 byte and the inverse of the smallest power of
// two s with a/s <= limit (a > 0), i.e. s = 2^ceil(log2(a/limit)).
func pow2Scale(a, limit float32) (byte, float32) {
	v := a / limit
	b := math.Float32bits(v)
	e := int((b>>23)&0xff) - 127
	if b&0x7fffff != 0 {
		e++
	}
	e = max(min(e, 127), -127)
	return byte(e + 127), float32(math.Ldexp(1, -e))
}

// absMax returns max|x| (compared as integer bits: x holds no NaN).
func absMax(x []float32) float32 {
	var m uint32
	for _, v := range x {
		m = max(m, math.Float32bits(v)&0x7fffffff)
	}
	return math.Float32frombits(m)
}

// job is one chunk of rows [r0, r1) of a tensor.
type job struct {
	t      *tensor
	r0, r1 int
	idx    int
}

// scratch is a worker's reusable memory.
type scratch struct {
	f   []float32
	out []byte
	sc  []byte
	idx []uint16 // table indices of the quantised kinds' values
	tab valueTab
}

// valueTab holds, for one tensor's mean and std, each normTab entry's
// value mean + std·z as the bits of |value| (for the block maxima) and as
// its top 13 bits (sign, exponent, 4 mantissa bits: the code tables' index).
type valueTab struct {
	mean, std float32
	ok        bool
	abs       [len(normTab)]uint32
	top       [len(normTab)]uint16
	// codes[e] is every entry's code at block scale byte e (made when a
	// block first has that scale; fp8 and fp4 codes by their own tables).
	codes [2][256]*[len(normTab)]byte
}

func (v *valueTab) set(mean, std float32) {
	if v.ok && v.mean == mean && v.std == std {
		return
	}
	v.mean, v.std, v.ok = mean, std, true
	v.codes = [2][256]*[len(normTab)]byte{}
	for i, z := range normTab {
		b := math.Float32bits(mean + std*z)
		v.abs[i], v.top[i] = b&0x7fffffff, uint16(b>>19)
	}
}

// indices draws the table indices normals would turn into values: the
// same random numbers in the same order (five indices per number, the
// tail of x from one more).
func (r *rng) indices(x []uint16) {
	const m = uint64(len(normTab) - 1)
	i := 0
	for ; i+5 <= len(x); i += 5 {
		u := r.next()
		x[i] = uint16(u & m)
		x[i+1] = uint16(u >> 12 & m)
		x[i+2] = uint16(u >> 24 & m)
		x[i+3] = uint16(u >> 36 & m)
		x[i+4] = uint16(u >> 48 & m)
	}
	if i < len(x) {
		u := r.next()
		for ; i < len(x); i++ {
			x[i] = uint16(u & m)
			u >>= 12
		}
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// logical returns rows and columns of a weight's logical (dequantised) shape.
func (t *tensor) logical() (rows, cols int) {
	rows = 1
	for _, d := range t.shape[:len(t.shape)-1] {
		rows *= d
	}
	cols = t.shape[len(t.shape)-1]
	if t.kind == kindFP4 {
		cols *= 2
	}
	return rows, cols
}

// gen computes the stored bytes of rows [r0, r1) of j.t (and of the
// matching scale rows). It returns the data bytes and the scale bytes.
// Values are drawn strip by strip (32 rows for fp8 blocks, one row
// otherwise) so that they stay in cache between drawing and quantising.
func gen(j job, s *scratch) (data, scales []byte) {
	t := j.t
	_, cols := t.logical()
	rows := j.r1 - j.r0
	r := newRNG(t.seed + uint64(j.idx)*0x9e3779b97f4a7c15)
	mean, std := float32(t.mean), float32(t.std)
	strip := 1
	switch t.kind {
	case kindF32:
		s.out = grow(s.out, 4*rows*cols)
	case kindBF16:
		s.out = grow(s.out, 2*rows*cols)
	case kindFP8:
		strip = 32
		s.out = grow(s.out, rows*cols)
		s.sc = grow(s.sc, ceilDiv(rows, 32)*ceilDiv(cols, 32))
	case kindFP8Row:
		s.out = grow(s.out, rows*cols)
		s.sc = grow(s.sc, rows*ceilDiv(cols, 32))
	case kindFP4:
		s.out = grow(s.out, rows*cols/2)
		s.sc = grow(s.sc, rows*ceilDiv(cols, 32))
	default:
		panic("gen of a scale tensor")
	}
	if t.kind != kindF32 && t.kind != kindBF16 {
		genQuant(t, r, rows, cols, strip, s)
		return s.out, s.sc
	}
	for r0 := 0; r0 < rows; r0 += strip {
		n := min(strip, rows-r0)
		s.f = grow(s.f, n*cols)
		x := s.f
		r.normals(x, mean, std)
		switch t.kind {
		case kindF32:
			out := s.out[4*r0*cols:]
			for i, v := range x {
				binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
			}
		case kindBF16:
			out := s.out[2*r0*cols:]
			for i, v := range x {
				binary.LittleEndian.PutUint16(out[2*i:], numfmt.BF16Bits(v))
			}
		case kindFP8:
			cb := ceilDiv(cols, 32)
			quantFP8Strip(x, n, cols, s.out[r0*cols:], s.sc[(r0/32)*cb:(r0/32+1)*cb])
		case kindFP8Row:
			quantRow(x, s.out[r0*cols:(r0+1)*cols], s.sc[r0*ceilDiv(cols, 32):], false)
		case kindFP4:
			quantRow(x, s.out[r0*cols/2:(r0+1)*cols/2], s.sc[r0*ceilDiv(cols, 32):], true)
		}
	}
	if t.kind == kindF32 || t.kind == kindBF16 {
		return s.out, nil
	}
	return s.out, s.sc
}

// genQuant is gen of the quantised kinds without the float values: each
// value is a table index, its block maximum and code come from the
// tensor's valueTab, and the power-of-two scale is applied to the code
// index's exponent bits (exact: v·2^-e has v's mantissa). Identical to
// quantising the values normals draws (quantFP8Strip, quantRow).
func genQuant(t *tensor, r *rng, rows, cols, strip int, s *scratch) {
	s.tab.set(float32(t.mean), float32(t.std))
	tab := &s.tab
	limit, codes, which := float32(numfmt.E4M3Max), &e4m3Tab, 0
	if t.kind == kindFP4 {
		limit, codes, which = 6, &e2m1Tab, 1
	}
	const m = len(normTab) - 1
	cb := ceilDiv(cols, 32)
	for r0 := 0; r0 < rows; r0 += strip {
		n := min(strip, rows-r0)
		s.idx = grow(s.idx, n*cols)
		x := s.idx
		r.indices(x)
		// A block is 32 columns of the strip: 32x32 for fp8, one row's 32
		// for the row-scaled kinds (their strip is one row).
		sc := s.sc[(r0/strip)*cb:]
		for bj := 0; bj < cb; bj++ {
			c0, c1 := bj*32, min(bj*32+32, cols)
			var a uint32
			for rr := 0; rr < n; rr++ {
				a = max(a, blockMax(tab, x[rr*cols+c0:rr*cols+c1]))
			}
			e, inv := pow2Scale(max(math.Float32frombits(a), 1e-30), limit)
			sc[bj] = e
			ct := tab.codes[which][e]
			if ct == nil {
				ct = new([len(normTab)]byte)
				for k := range ct {
					ct[k] = scaled(tab, codes, uint16(k), e, inv)
				}
				tab.codes[which][e] = ct
			}
			for rr := 0; rr < n; rr++ {
				blk := x[rr*cols+c0 : rr*cols+c1]
				if t.kind == kindFP4 {
					o := s.out[(r0+rr)*cols/2+c0/2 : (r0+rr)*cols/2+c1/2]
					if len(blk) == 32 { // fixed sizes: no bounds checks
						pack32((*[16]byte)(o), (*[32]uint16)(blk), ct)
						continue
					}
					for i := 0; i+1 < len(blk); i += 2 {
						o[i/2] = ct[int(blk[i])&m] | ct[int(blk[i+1])&m]<<4
					}
					continue
				}
				o := s.out[(r0+rr)*cols+c0 : (r0+rr)*cols+c1]
				for i, k := range blk {
					o[i] = ct[int(k)&m]
				}
			}
		}
	}
}

// pack32 packs the codes of 32 entries two a byte, the even one low.
func pack32(o *[16]byte, ks *[32]uint16, ct *[len(normTab)]byte) {
	const m = len(normTab) - 1
	for i := range o {
		o[i] = ct[int(ks[2*i])&m] | ct[int(ks[2*i+1])&m]<<4
	}
}

// blockMax is the largest |value| bits of the entries k (four chains).
func blockMax(tab *valueTab, ks []uint16) uint32 {
	const m = len(normTab) - 1
	var a0, a1, a2, a3 uint32
	i := 0
	for ; i+4 <= len(ks); i += 4 {
		a0 = max(a0, tab.abs[int(ks[i])&m])
		a1 = max(a1, tab.abs[int(ks[i+1])&m])
		a2 = max(a2, tab.abs[int(ks[i+2])&m])
		a3 = max(a3, tab.abs[int(ks[i+3])&m])
	}
	for ; i < len(ks); i++ {
		a0 = max(a0, tab.abs[int(ks[i])&m])
	}
	return max(a0, a1, a2, a3)
}

// scaled is the code of value k times 2^-(e-127) (inv): the exponent bits
// of the code index lowered by e-127, or the float product where that
// leaves the normal range.
func scaled(tab *valueTab, codes *[1 << 13]byte, k uint16, e byte, inv float32) byte {
	top := int(tab.top[k])
	ex := top>>4&0xff - (int(e) - 127)
	if ex <= 0 || ex >= 0xff || top>>4&0xff == 0 {
		v := math.Float32frombits(uint32(top&0x1000)<<19 | tab.abs[k])
		return codes[math.Float32bits(v*inv)>>19]
	}
	return codes[top&0x100f|ex<<4]
}

// quantFP8Strip quantises a strip of up to 32 rows x cols values to e4m3
// codes with one e8m0 scale per 32x32 block.
func quantFP8Strip(x []float32, rows, cols int, out, sc []byte) {
	for bj := 0; bj*32 < cols; bj++ {
		c0, c1 := bj*32, min(bj*32+32, cols)
		var a float32
		for r := 0; r < rows; r++ {
			a = max(a, absMax(x[r*cols+c0:r*cols+c1]))
		}
		e, inv := pow2Scale(max(a, 1e-30), numfmt.E4M3Max)
		sc[bj] = e
		for r := 0; r < rows; r++ {
			o := out[r*cols+c0 : r*cols+c1]
			for i, v := range x[r*cols+c0 : r*cols+c1] {
				o[i] = e4m3Tab[math.Float32bits(v*inv)>>19]
			}
		}
	}
}

// quantRow quantises one row with one e8m0 scale per 32 columns: e4m3
// codes (fp8row) or e2m1 codes packed two per byte, the even column in the
// low nibble (fp4).
func quantRow(x []float32, out, sc []byte, fp4 bool) {
	limit := float32(numfmt.E4M3Max)
	if fp4 {
		limit = 6
	}
	for bj := 0; bj*32 < len(x); bj++ {
		c0, c1 := bj*32, min(bj*32+32, len(x))
		blk := x[c0:c1]
		e, inv := pow2Scale(max(absMax(blk), 1e-30), limit)
		sc[bj] = e
		if !fp4 {
			o := out[c0:c1]
			for i, v := range blk {
				o[i] = e4m3Tab[math.Float32bits(v*inv)>>19]
			}
			continue
		}
		o := out[c0/2 : c1/2]
		for i := 0; i+1 < len(blk); i += 2 {
			lo := e2m1Tab[math.Float32bits(blk[i]*inv)>>19]
			hi := e2m1Tab[math.Float32bits(blk[i+1]*inv)>>19]
			o[i/2] = lo | hi<<4
		}
	}
}
