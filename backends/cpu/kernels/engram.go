package kernels

import (
	"math"

	"github.com/ds4go/ds4/internal/numfmt"
)

// Engram (spec §4.11): n-gram hashing of the compressed token history, the
// fp8 table lookup, and the per-copy gate that adds the looked-up value into
// the hyper-connection stream.

// EngramDead is the history value of a token that takes no part in any
// n-gram (image-span tokens); look-back stops at it.
const EngramDead int64 = -1

// EngramHistoryWrite stores this call's compressed token ids mapped [b, s]
// (token_map[input_ids], or EngramDead) into the per-row history
// hist [≥b, maxLen] at columns startPos..startPos+s−1.
func EngramHistoryWrite(hist []int64, b, maxLen int, mapped []int64, s, startPos int) {
	if startPos+s > maxLen {
		panic("kernels.EngramHistoryWrite: history overflow")
	}
	for bi := 0; bi < b; bi++ {
		copy(hist[bi*maxLen+startPos:bi*maxLen+startPos+s], mapped[bi*s:(bi+1)*s])
	}
}

// EngramHash is NgramHashState.forward after the history write (spec §4.11
// "Hash ids"): out [b, s, nLayers, (maxNgram−1)·heads] int64 table rows,
// where nLayers = len(multipliers), maxNgram = len(multipliers[L]),
// heads = len(primes[L][i]).
//
// For query position p = startPos + t and shift σ = 0..maxNgram−1:
// src_σ = hist[b, max(p−σ, 0)], blocked_σ = blocked_{σ−1} ∨ (p < σ) ∨
// (src_σ == EngramDead) (cumulative), tok_σ = pad if blocked_σ else src_σ.
// With wrapping int64 arithmetic (no overflow occurs for valid constants):
// P_σ = tok_σ · multipliers[L][σ], roll_1 = P_0 XOR P_1,
// roll_{i+1} = roll_i XOR P_{i+1}; column c = i·heads + h (i = 0..maxNgram−2)
// is (roll_{i+1} mod primes[L][i][h]) + offsets[L][c], with mod taking the
// sign of the divisor (torch's % on int64).
func EngramHash(out []int64, hist []int64, b, maxLen, s, startPos int, multipliers [][]int64, primes [][][]int64, offsets [][]int64, pad int64) {
	nl := len(multipliers)
	if nl == 0 {
		return
	}
	ng := len(multipliers[0])
	heads := len(primes[0][0])
	cols := (ng - 1) * heads
	tok := make([]int64, ng)
	for bi := 0; bi < b; bi++ {
		h := hist[bi*maxLen : (bi+1)*maxLen]
		for t := 0; t < s; t++ {
			p := startPos + t
			blocked := false
			for sg := 0; sg < ng; sg++ {
				src := h[max(p-sg, 0)]
				blocked = blocked || p < sg || src == EngramDead
				tok[sg] = src
				if blocked {
					tok[sg] = pad
				}
			}
			for l := 0; l < nl; l++ {
				o := out[((bi*s+t)*nl+l)*cols : ((bi*s+t)*nl+l+1)*cols]
				roll := tok[0] * multipliers[l][0]
				for i := 1; i < ng; i++ {
					roll ^= tok[i] * multipliers[l][i]
					for hi := 0; hi < heads; hi++ {
						c := (i-1)*heads + hi
						o[c] = engramFloorMod(roll, primes[l][i-1][hi]) + offsets[l][c]
					}
				}
			}
		}
	}
}

// engramFloorMod is a mod m with the sign of m (Python/torch semantics).
func engramFloorMod(a, m int64) int64 {
	r := a % m
	if r != 0 && (r < 0) != (m < 0) {
		r += m
	}
	return r
}

// EngramLookup gathers Engram table rows (spec §4.11 step 1,
// ParallelEngramEmbedding on one rank): for each index r of rows,
// out[i, c] = bf16(e4m3(table[r, c]) · e8m0(scale[r, c/32])) for
// c = 0..width−1, with table [numRows, width] e4m3 codes and scale
// [numRows, width/32] e8m0 bytes. An index outside [0, numRows) yields a zero
// row (the reference masks rows owned by another rank). out is
// [len(rows), width].
func EngramLookup(out []float32, table []byte, scale []byte, width int, rows []int64) {
	const block = 32
	if width%block != 0 {
		panic("kernels.EngramLookup: width is not a multiple of 32")
	}
	numRows := int64(len(table) / width)
	sw := width / block
	for i, r := range rows {
		o := out[i*width : (i+1)*width]
		if r < 0 || r >= numRows {
			clear(o)
			continue
		}
		tr := table[r*int64(width) : (r+1)*int64(width)]
		sr := scale[r*int64(sw) : (r+1)*int64(sw)]
		for c, code := range tr {
			o[c] = numfmt.BF16Round(numfmt.E4M3ToF32(code) * numfmt.E8M0ToF32(sr[c/block]))
		}
	}
}

// EngramClamp is the floor on |dot| before the signed square root of the
// Engram gate (reference clamp_value).
const EngramClamp = float32(1e-6)

// EngramGate applies the Engram gate (spec §4.11 steps 4-5, reference
// Engram.forward after wkv) to the stream h [tokens, hc, dim] (bf16 values):
//
//	ρ_j    = rsqrt(mean_d(h_j²) + eps) · rsqrt(mean_d(key_j²) + eps)
//	dot_j  = ((Σ_d fp32(fp32(h_j[d]·ω_j[d])·key_j[d])) · ρ_j) · fp32(dim^−0.5)
//	gate_j = sigmoid(copysign(sqrt(max(|dot_j|, 1e-6)), dot_j))
//	hOut_j = bf16(h_j + fp32(gate_j · value))
//
// key [tokens, hc, dim] and value [tokens, dim] are the bf16 halves of
// wkv·e (as fp32), omega [hc, dim] = fp32(q_weight)·fp32(k_weight), eps the
// norm eps (1e-20) as fp32. All arithmetic is fp32 with explicit rounding
// after each product; the sums (Σ h², Σ key², Σ of the dot terms) are
// accumulated in float64 and rounded once to fp32; mean = sum / dim (fp32
// division); rsqrt(x) = 1/sqrt(x) (two fp32 roundings, as torch's CPU
// rsqrt); sigmoid = 1/(1+exp(−x)) in float64, rounded to fp32. A dot of −0
// gives gate sigmoid(−1e-3). hOut may alias h.
func EngramGate(hOut, h []float32, tokens, hc, dim int, key []float32, value []float32, omega []float32, eps float32) {
	if len(h) < tokens*hc*dim || len(hOut) < tokens*hc*dim || len(key) < tokens*hc*dim || len(value) < tokens*dim || len(omega) < hc*dim {
		panic("kernels.EngramGate: buffer too small")
	}
	scale := float32(1 / math.Sqrt(float64(dim)))
	fdim := float32(dim)
	for t := 0; t < tokens; t++ {
		v := value[t*dim : (t+1)*dim]
		for j := 0; j < hc; j++ {
			o := (t*hc + j) * dim
			hj := h[o : o+dim]
			kj := key[o : o+dim]
			wj := omega[j*dim : (j+1)*dim]
			var sh, sk, sd float64
			for d := 0; d < dim; d++ {
				sh += float64(float32(hj[d] * hj[d]))
				sk += float64(float32(kj[d] * kj[d]))
				sd += float64(float32(float32(hj[d]*wj[d]) * kj[d]))
			}
			rh := engramRsqrt(float32(sh)/fdim + eps)
			rk := engramRsqrt(float32(sk)/fdim + eps)
			rho := rh * rk
			dot := float32(float32(sd)*rho) * scale
			mag := float32(math.Sqrt(float64(max(float32(math.Abs(float64(dot))), EngramClamp))))
			arg := float32(math.Copysign(float64(mag), float64(dot)))
			gate := float32(1 / (1 + math.Exp(-float64(arg))))
			ho := hOut[o : o+dim]
			for d := 0; d < dim; d++ {
				ho[d] = numfmt.BF16Round(hj[d] + float32(gate*v[d]))
			}
		}
	}
}

// engramRsqrt is torch's CPU rsqrt on fp32: 1/sqrt(x), each rounded to fp32.
func engramRsqrt(x float32) float32 {
	return 1 / float32(math.Sqrt(float64(x)))
}
