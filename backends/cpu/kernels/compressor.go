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
	const ratio = 2
	if startPos == 0 {
		groups = s / ratio
		for bi := 0; bi < b; bi++ {
			for g := 0; g < groups; g++ {
				t0 := (bi*s + ratio*g) * d
				t1 := t0 + d
				compressorPoolPair(out[(bi*groups+g)*d:(bi*groups+g+1)*d],
					c[t0:t0+d], z[t0:t0+d], c[t1:t1+d], z[t1:t1+d])
			}
			if s%ratio != 0 {
				t := (bi*s + s - 1) * d
				copy(kvState[bi*ratio*d:bi*ratio*d+d], c[t:t+d])
				copy(scoreState[bi*ratio*d:bi*ratio*d+d], z[t:t+d])
			}
		}
		return groups
	}
	if s != 1 {
		panic("kernels.CompressorPool2: decode takes exactly one token")
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
		s0 := bi * ratio * d
		s1 := s0 + d
		compressorPoolPair(out[bi*d:(bi+1)*d],
			kvState[s0:s0+d], scoreState[s0:s0+d], kvState[s1:s1+d], scoreState[s1:s1+d])
	}
	return 1
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
