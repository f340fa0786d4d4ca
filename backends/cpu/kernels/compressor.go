package kernels

import "math"

// CompressorPool is the pooling step of the gated Compressor (spec §4.6,
// layers with compress_ratio r ≥ 2; the released model uses r = 2). c and z
// are the fp32 projections c = wkv·x, z = wgate·x of this call, both
// [b, s, d]; kvState and scoreState [≥b, r, d] (fp32) hold the incomplete
// group across calls; scoreState must be initialised to -inf by the caller
// (kvState to 0).
//
// Prefill (startPos == 0): the complete groups g = 0..⌊s/r⌋−1 (tokens
// r·g .. r·g+r−1) are pooled into out [b, ⌊s/r⌋, d]; the incomplete tail of
// s mod r tokens is stored into state slots 0..(s mod r)−1.
//
// Decode (startPos > 0, s must be 1): the token's (c, z) is stored into slot
// startPos mod r; when (startPos+1) mod r == 0 the r slots are pooled into
// out [b, 1, d]; otherwise nothing is written to out.
//
// Returns the number of groups written per batch row (0 when no group
// completed: the reference Compressor returns None then).
//
// Pooling, per channel, over the tokens (slots) of a group, in fp32, as
// torch's CPU `(kv * score.softmax(dim)).sum(dim)` computes it (softmax along
// a non-innermost axis, which divides by the sum), each sum in token order:
//
//	μ   = max_j z_j
//	e_j = exp(z_j − μ)
//	σ   = e_0 + e_1 + …
//	out = c_0·(e_0/σ) + c_1·(e_1/σ) + …       fp32 products and adds
//
// exp is math.Exp rounded to float32 (torch uses Sleef expf_u10, so the
// non-unit weights can differ by 1 fp32 ulp). The output is the fp32 pooled
// latent; the caller rounds it to bf16 and applies the compressor RMSNorm.
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

// CompressorPoolChunk is the pooling of a chunk call of s tokens at any
// startPos ≥ 0 (the incremental form of CompressorPool): every group g with
// startPos ≤ r·g+r−1 < startPos+s completes in this call and is pooled into
// out [b, groups, d]; its token at position p comes from the state slot
// p mod r when p < startPos (kvState and scoreState as the previous call
// left them: the caller reads them before GroupStateChunk writes this
// call's tail) and from row p − startPos of c and z otherwise. The pooling
// is compressorPoolGroup's, so a group gives the same bits however the
// prompt was split into calls. It does not write the state.
func CompressorPoolChunk(out []float32, c, z []float32, b, s, d, ratio int, kvState, scoreState []float32, startPos int) (groups int) {
	cs := make([][]float32, ratio)
	zs := make([][]float32, ratio)
	g0, g1 := startPos/ratio, (startPos+s)/ratio
	for bi := 0; bi < b; bi++ {
		for g := g0; g < g1; g++ {
			for j := 0; j < ratio; j++ {
				if p := g*ratio + j; p < startPos {
					o := (bi*ratio + j) * d
					cs[j], zs[j] = kvState[o:o+d], scoreState[o:o+d]
				} else {
					t := (bi*s + p - startPos) * d
					cs[j], zs[j] = c[t:t+d], z[t:t+d]
				}
			}
			compressorPoolGroup(out[(bi*(g1-g0)+g-g0)*d:(bi*(g1-g0)+g-g0+1)*d], cs, zs)
		}
	}
	return g1 - g0
}

// GroupStateChunk stores the incomplete tail group of a chunk call of s
// tokens at startPos into state [≥b, r, d]: the rows of x [b, s, d] at
// positions p ≥ max(startPos, r·⌊(startPos+s)/r⌋) go to slot p mod r (at
// startPos 0 what a prefill keeps). Slots of completed groups are left as
// they are: no later call reads them.
func GroupStateChunk(state, x []float32, b, s, d, ratio, startPos int) {
	from := max(startPos, (startPos+s)/ratio*ratio)
	for bi := 0; bi < b; bi++ {
		for p := from; p < startPos+s; p++ {
			src := (bi*s + p - startPos) * d
			dst := (bi*ratio + p%ratio) * d
			copy(state[dst:dst+d], x[src:src+d])
		}
	}
}

// compressorPoolGroup pools the tokens of one group per channel with a
// softmax over their gate scores (see CompressorPool for the order). Both
// sums start from their first term, so that a −0 product is kept as the
// reference's two-term sum keeps it.
func compressorPoolGroup(out []float32, cs, zs [][]float32) {
	e := make([]float32, len(cs))
	for i := range out {
		mu := zs[0][i]
		for _, z := range zs[1:] {
			mu = max(mu, z[i])
		}
		for j, z := range zs {
			e[j] = float32(math.Exp(float64(z[i] - mu)))
		}
		sum := e[0]
		for _, v := range e[1:] {
			sum += v
		}
		acc := float32(cs[0][i] * (e[0] / sum))
		for j, c := range cs[1:] {
			acc += float32(c[i] * (e[j+1] / sum))
		}
		out[i] = acc
	}
}
