package kernels

import "math"

// CompressorPool2 is the pooling step of the ratio-2 Compressor (spec §4.6,
// layers with compress_ratio 2). c and z are the fp32 projections
// c = wkv·x, z = wgate·x of this call, both [b, s, d]; kvState and
// scoreState [≥b, 2, d] (fp32) hold the incomplete group across calls;
// scoreState must be initialised to -inf by the caller (kvState to 0).
//
// Prefill (startPos == 0): the complete groups g = 0..⌊s/2⌋−1 (tokens 2g,
// 2g+1) are pooled into out [b, ⌊s/2⌋, d]; if s is odd the last token's
// (c, z) is stored into state slot 0 (slot 1 is left untouched).
//
// Decode (startPos > 0, s must be 1): the token's (c, z) is stored into slot
// startPos mod 2; when (startPos+1) mod 2 == 0 the two slots are pooled into
// out [b, 1, d]; otherwise nothing is written to out.
//
// Returns the number of groups written per batch row (0 when no group
// completed: the reference Compressor returns None then).
//
// Pooling, per channel, over the two tokens (slots) a, b of a group, in fp32,
// exactly as torch's CPU `(kv * score.softmax(dim)).sum(dim)` computes it
// (softmax along a non-innermost axis, which divides by the sum):
//
//	μ   = max(z_a, z_b)
//	e_a = exp(z_a − μ), e_b = exp(z_b − μ)   (one of them is exp(0) = 1)
//	σ   = e_a + e_b
//	out = c_a·(e_a/σ) + c_b·(e_b/σ)           fp32 products and one fp32 add
//
// exp is math.Exp rounded to float32 (torch uses Sleef expf_u10, so the
// non-unit weight can differ by 1 fp32 ulp). The output is the fp32 pooled
// latent; the caller rounds it to bf16 and applies the compressor RMSNorm.
func CompressorPool2(out []float32, c, z []float32, b, s, d int, kvState, scoreState []float32, startPos int) (groups int) {
	return CompressorPool(out, c, z, b, s, d, 2, kvState, scoreState, startPos)
}

// CompressorPool is CompressorPool2 for any ratio r ≥ 2: groups of r
// consecutive tokens, state [b, r, d], the incomplete prefill tail stored
// in slots 0..(s mod r)−1, decode slot start_pos mod r, a latent when
// (start_pos+1) mod r == 0. Per channel: μ = max_j z_j, e_j = exp(z_j − μ),
// σ = Σ_j e_j (in token order), out = Σ_j c_j·(e_j/σ) (in token order), fp32;
// for r = 2 this is exactly the pair formula above.
func CompressorPool(out []float32, c, z []float32, b, s, d, ratio int, kvState, scoreState []float32, startPos int) (groups int) {
	cs := make([][]float32, ratio)
	zs := make([][]float32, ratio)
	if startPos == 0 {
		groups = s / ratio
		for bi := 0; bi < b; bi++ {
			for g := 0; g < groups; g++ {
				for j := 0; j < ratio; j++ {
					t := (bi*s + ratio*g + j) * d
					cs[j], zs[j] = c[t:t+d], z[t:t+d]
				}
				compressorPoolGroup(out[(bi*groups+g)*d:(bi*groups+g+1)*d], cs, zs)
			}
			for t := groups * ratio; t < s; t++ {
				src := (bi*s + t) * d
				dst := (bi*ratio + t%ratio) * d
				copy(kvState[dst:dst+d], c[src:src+d])
				copy(scoreState[dst:dst+d], z[src:src+d])
			}
		}
		return groups
	}
	if s != 1 {
		panic("kernels.CompressorPool: decode takes exactly one token")
	}
	slot := startPos % ratio
	for bi := 0; bi < b; bi++ {
		o := (bi*ratio + slot) * d
		copy(kvState[o:o+d], c[bi*d:(bi+1)*d])
		copy(scoreState[o:o+d], z[bi*d:(bi+1)*d])
	}
	if (startPos+1)%ratio != 0 {
		return 0
	}
	for bi := 0; bi < b; bi++ {
		for j := 0; j < ratio; j++ {
			o := (bi*ratio + j) * d
			cs[j], zs[j] = kvState[o:o+d], scoreState[o:o+d]
		}
		compressorPoolGroup(out[bi*d:(bi+1)*d], cs, zs)
	}
	return 1
}

// compressorPoolGroup pools the tokens of one group per channel with a
// softmax over their gate scores (see CompressorPool for the order).
func compressorPoolGroup(out []float32, cs, zs [][]float32) {
	if len(cs) == 2 {
		compressorPoolPair(out, cs[0], zs[0], cs[1], zs[1])
		return
	}
	e := make([]float32, len(cs))
	for i := range out {
		mu := zs[0][i]
		for _, z := range zs[1:] {
			mu = max(mu, z[i])
		}
		var sum float32
		for j, z := range zs {
			e[j] = float32(math.Exp(float64(z[i] - mu)))
			sum += e[j]
		}
		var acc float32
		for j, c := range cs {
			acc += float32(c[i] * (e[j] / sum))
		}
		out[i] = acc
	}
}

// compressorPoolPair pools two tokens per channel with a softmax over their
// gate scores (see CompressorPool2 for the exact operation order).
func compressorPoolPair(out, ca, za, cb, zb []float32) {
	for i := range out {
		mu := max(za[i], zb[i])
		ea := float32(math.Exp(float64(za[i] - mu)))
		eb := float32(math.Exp(float64(zb[i] - mu)))
		sum := ea + eb
		out[i] = float32(ca[i]*(ea/sum)) + float32(cb[i]*(eb/sum))
	}
}
