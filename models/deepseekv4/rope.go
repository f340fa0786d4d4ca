package deepseekv4

import (
	"fmt"
	"math"
)

// RopeParams are the arguments of the reference precompute_freqs_cis(dim,
// seqlen, original_seq_len, base, factor, beta_fast, beta_slow).
type RopeParams struct {
	Dim            int     // rotated dims (rope_head_dim); the table has Dim/2 pairs
	OriginalSeqLen int     // YaRN on when > 0
	Base           float64 // rope_theta or compress_rope_theta
	Factor         float64
	BetaFast       float64
	BetaSlow       float64
}

// RopeTable is a freqs_cis table: CosSin[(t*Pairs+i)*2+0] = cos(t·f_i),
// CosSin[(t*Pairs+i)*2+1] = sin(t·f_i), fp32 — the layout [seqLen, Dim/2, 2]
// of the golden tensors (a complex64 view of the reference table).
type RopeTable struct {
	Pairs  int
	SeqLen int
	CosSin []float32
}

// At returns (cos, sin) of position t, pair i.
func (r *RopeTable) At(t, i int) (cos, sin float32) {
	k := (t*r.Pairs + i) * 2
	return r.CosSin[k], r.CosSin[k+1]
}

// Row returns the Pairs (cos, sin) pairs of position t, interleaved.
func (r *RopeTable) Row(t int) []float32 {
	return r.CosSin[t*r.Pairs*2 : (t+1)*r.Pairs*2]
}

// RopeParams returns the RoPE arguments of layer (backbone or MTP): ratio 0
// uses rope_theta without YaRN; ratio > 0 uses compress_rope_theta with YaRN
// when original_seq_len > 0 (spec §4.4).
func (c *Config) RopeParams(layer int) RopeParams {
	p := RopeParams{Dim: c.RopeHeadDim, Factor: c.RopeFactor, BetaFast: c.BetaFast, BetaSlow: c.BetaSlow}
	ratio := 0
	if layer >= 0 && layer < len(c.CompressRatios) {
		ratio = c.CompressRatios[layer]
	}
	if ratio == 0 {
		p.Base = c.RopeTheta
		p.OriginalSeqLen = 0
	} else {
		p.Base = c.CompressRopeTheta
		p.OriginalSeqLen = c.OriginalSeqLen
	}
	return p
}

// RopeTable returns the freqs_cis table of layer for positions 0..maxSeqLen-1.
func (c *Config) RopeTable(layer, maxSeqLen int) *RopeTable {
	return c.RopeParams(layer).Table(maxSeqLen)
}

// Table computes the freqs_cis table for positions 0..seqLen-1.
func (p RopeParams) Table(seqLen int) *RopeTable {
	return FreqsCis(p.Dim, seqLen, p.OriginalSeqLen, p.Base, p.Factor, p.BetaFast, p.BetaSlow)
}

// RopeFreqs returns the fp32 frequencies f_i (i < dim/2) exactly as the
// reference computes them in fp32:
//
//	freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=float32) / dim))
//	if original_seq_len > 0:
//	    low, high = find_correction_range(beta_fast, beta_slow, dim, base, original_seq_len)
//	    smooth = 1 - linear_ramp_factor(low, high, dim // 2)
//	    freqs = freqs / factor * (1 - smooth) + freqs * smooth
func RopeFreqs(dim, originalSeqLen int, base, factor, betaFast, betaSlow float64) []float32 {
	if dim <= 0 || dim%2 != 0 {
		panic(fmt.Sprintf("deepseekv4: RopeFreqs: dim %d must be positive and even", dim))
	}
	half := dim / 2
	freqs := make([]float32, half)
	base32 := float32(base)
	for i := range freqs {
		e := float32(2*i) / float32(dim)
		// torch pow in fp32; computed in float64 and rounded once.
		pw := float32(math.Pow(float64(base32), float64(e)))
		freqs[i] = 1 / pw
	}
	if originalSeqLen > 0 {
		low, high := yarnCorrectionRange(betaFast, betaSlow, dim, base, float64(originalSeqLen))
		lowF, highF := float64(low), float64(high)
		if lowF == highF {
			highF += 0.001
		}
		den := float32(highF - lowF)
		fac := float32(factor)
		for i := range freqs {
			ramp := (float32(i) - float32(lowF)) / den
			ramp = min(max(ramp, 0), 1)
			smooth := 1 - ramp
			a := float32(freqs[i]/fac) * float32(1-smooth)
			b := float32(freqs[i] * smooth)
			freqs[i] = a + b
		}
	}
	return freqs
}

// yarnCorrectionRange is the reference find_correction_range (python floats).
func yarnCorrectionRange(lowRot, highRot float64, dim int, base, maxSeqLen float64) (int, int) {
	cdim := func(rot float64) float64 {
		return float64(dim) * math.Log(maxSeqLen/(rot*2*math.Pi)) / (2 * math.Log(base))
	}
	low := int(math.Floor(cdim(lowRot)))
	high := int(math.Ceil(cdim(highRot)))
	return max(low, 0), min(high, dim-1)
}

// FreqsCis computes the reference precompute_freqs_cis table [seqLen, dim/2]:
// the angle t·f_i is an fp32 product (torch.outer of fp32 positions and fp32
// freqs); cos and sin are fp32 functions bit-identical to glibc's cosf/sinf,
// which torch.polar calls on the CPU (see rope_sincosf.go).
func FreqsCis(dim, seqLen, originalSeqLen int, base, factor, betaFast, betaSlow float64) *RopeTable {
	freqs := RopeFreqs(dim, originalSeqLen, base, factor, betaFast, betaSlow)
	half := len(freqs)
	t := &RopeTable{Pairs: half, SeqLen: seqLen, CosSin: make([]float32, seqLen*half*2)}
	for pos := 0; pos < seqLen; pos++ {
		row := t.CosSin[pos*half*2:]
		for i, f := range freqs {
			ang := float32(float32(pos) * f)
			row[2*i], row[2*i+1] = cosfGlibc(ang), sinfGlibc(ang)
		}
	}
	return t
}
