package deepseekv4

import "math/bits"

// This file reproduces, bit for bit, the part of NumPy's random module that
// the Engram hash multipliers come from:
//
//	numpy.random.default_rng(seed).integers(0, high, size=n, dtype=np.int64)
//
// i.e. SeedSequence(seed) (bit_generator.pyx) → PCG64 seeded with
// generate_state(4, uint64) (pcg64.pyx, pcg64.c) → random_bounded_uint64_fill
// with use_masked=False (distributions.c: Lemire's rejection method).

// SeedSequence constants (numpy/random/bit_generator.pyx).
const (
	ssPoolSize = 4
	ssInitA    = 0x43b0d7e5
	ssMultA    = 0x931e8875
	ssInitB    = 0x8b51f9dd
	ssMultB    = 0x58f38ded
	ssMixMultL = 0xca01f9dd
	ssMixMultR = 0x4973f715
	ssXShift   = 16
)

// seedSequence is numpy's SeedSequence for a non-negative integer entropy,
// without spawn key.
type seedSequence struct {
	pool [ssPoolSize]uint32
}

// newSeedSequence mixes the entropy like SeedSequence(entropy).
func newSeedSequence(entropy uint64) *seedSequence {
	// _int_to_uint32_array: little-endian 32-bit words, [0] for 0.
	words := []uint32{uint32(entropy)}
	for e := entropy >> 32; e > 0; e >>= 32 {
		words = append(words, uint32(e))
	}
	s := &seedSequence{}
	hashConst := uint32(ssInitA)
	hashmix := func(v uint32) uint32 {
		v ^= hashConst
		hashConst *= ssMultA
		v *= hashConst
		v ^= v >> ssXShift
		return v
	}
	mix := func(x, y uint32) uint32 {
		r := ssMixMultL*x - ssMixMultR*y
		return r ^ r>>ssXShift
	}
	for i := range s.pool {
		if i < len(words) {
			s.pool[i] = hashmix(words[i])
		} else {
			s.pool[i] = hashmix(0)
		}
	}
	for src := range s.pool {
		for dst := range s.pool {
			if src != dst {
				s.pool[dst] = mix(s.pool[dst], hashmix(s.pool[src]))
			}
		}
	}
	for src := ssPoolSize; src < len(words); src++ {
		for dst := range s.pool {
			s.pool[dst] = mix(s.pool[dst], hashmix(words[src]))
		}
	}
	return s
}

// generateState64 is generate_state(n, np.uint64): 2n 32-bit words viewed as
// little-endian uint64.
func (s *seedSequence) generateState64(n int) []uint64 {
	hashConst := uint32(ssInitB)
	w := make([]uint32, 2*n)
	for i := range w {
		v := s.pool[i%ssPoolSize]
		v ^= hashConst
		hashConst *= ssMultB
		v *= hashConst
		v ^= v >> ssXShift
		w[i] = v
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(w[2*i]) | uint64(w[2*i+1])<<32
	}
	return out
}

// u128 is an unsigned 128-bit integer.
type u128 struct{ hi, lo uint64 }

func (a u128) add(b u128) u128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, c)
	return u128{hi, lo}
}

func (a u128) mul(b u128) u128 {
	hi, lo := bits.Mul64(a.lo, b.lo)
	hi += a.hi*b.lo + a.lo*b.hi
	return u128{hi, lo}
}

// pcgMultiplier is PCG_DEFAULT_MULTIPLIER_128.
var pcgMultiplier = u128{2549297995355413924, 4865540595714422341}

// pcg64 is numpy's PCG64 (128-bit LCG, XSL-RR 64-bit output) including the
// 32-bit half buffer used by next_uint32.
type pcg64 struct {
	state, inc u128
	hasUint32  bool
	uinteger   uint32
}

// newPCG64 seeds like numpy.random.PCG64(seed): SeedSequence(seed),
// generate_state(4, uint64) → pcg64_set_seed(seed = words[0:2], inc = words[2:4])
// where words[0] is the high half of each 128-bit value.
func newPCG64(seed uint64) *pcg64 {
	v := newSeedSequence(seed).generateState64(4)
	p := &pcg64{}
	p.srandom(u128{v[0], v[1]}, u128{v[2], v[3]})
	return p
}

// srandom is pcg_setseq_128_srandom_r.
func (p *pcg64) srandom(initState, initSeq u128) {
	p.state = u128{}
	p.inc = u128{initSeq.hi<<1 | initSeq.lo>>63, initSeq.lo<<1 | 1}
	p.step()
	p.state = p.state.add(initState)
	p.step()
}

func (p *pcg64) step() { p.state = p.state.mul(pcgMultiplier).add(p.inc) }

// next64 is pcg64_next64: step, then XSL-RR output of the new state.
func (p *pcg64) next64() uint64 {
	p.step()
	rot := int(p.state.hi >> 58)
	return bits.RotateLeft64(p.state.hi^p.state.lo, -rot)
}

// next32 is pcg64_next32: the low half of a 64-bit draw, the high half kept
// for the next call.
func (p *pcg64) next32() uint32 {
	if p.hasUint32 {
		p.hasUint32 = false
		return p.uinteger
	}
	n := p.next64()
	p.hasUint32 = true
	p.uinteger = uint32(n >> 32)
	return uint32(n)
}

// boundedUint64 is random_bounded_uint64_fill(off, rng, cnt, use_masked=False):
// cnt values in the closed interval [off, off+rng].
func (p *pcg64) boundedUint64(off, rng uint64, cnt int) []uint64 {
	out := make([]uint64, cnt)
	switch {
	case rng == 0:
		for i := range out {
			out[i] = off
		}
	case rng <= 0xFFFFFFFF:
		for i := range out {
			if rng == 0xFFFFFFFF {
				out[i] = off + uint64(p.next32())
			} else {
				out[i] = off + uint64(p.lemire32(uint32(rng)))
			}
		}
	case rng == 0xFFFFFFFFFFFFFFFF:
		for i := range out {
			out[i] = off + p.next64()
		}
	default:
		for i := range out {
			out[i] = off + p.lemire64(rng)
		}
	}
	return out
}

// lemire32 is buffered_bounded_lemire_uint32.
func (p *pcg64) lemire32(rng uint32) uint32 {
	rngExcl := rng + 1
	m := uint64(p.next32()) * uint64(rngExcl)
	leftover := uint32(m)
	if leftover < rngExcl {
		threshold := (0xFFFFFFFF - rng) % rngExcl
		for leftover < threshold {
			m = uint64(p.next32()) * uint64(rngExcl)
			leftover = uint32(m)
		}
	}
	return uint32(m >> 32)
}

// lemire64 is bounded_lemire_uint64.
func (p *pcg64) lemire64(rng uint64) uint64 {
	rngExcl := rng + 1
	hi, lo := bits.Mul64(p.next64(), rngExcl)
	if lo < rngExcl {
		threshold := (0xFFFFFFFFFFFFFFFF - rng) % rngExcl
		for lo < threshold {
			hi, lo = bits.Mul64(p.next64(), rngExcl)
		}
	}
	return hi
}

// NumpyIntegers returns numpy.random.default_rng(seed).integers(low, high,
// size=n, dtype=np.int64) for low < high (the half-open interval [low, high)).
func NumpyIntegers(seed uint64, low, high int64, n int) []int64 {
	if high <= low {
		panic("deepseekv4: NumpyIntegers: high <= low")
	}
	rng := uint64(high-1) - uint64(low)
	u := newPCG64(seed).boundedUint64(uint64(low), rng, n)
	out := make([]int64, n)
	for i, v := range u {
		out[i] = int64(v)
	}
	return out
}
