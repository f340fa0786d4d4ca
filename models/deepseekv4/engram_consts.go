package deepseekv4

import (
	"fmt"
	"math"
	"math/big"
)

// EngramLayerConsts are the hashing constants of one Engram layer
// (reference EngramLayout.from_args; spec §4.11, Appendix A).
type EngramLayerConsts struct {
	Layer int // backbone layer id
	Slot  int // position in engram_layer_ids

	// Primes[i][h] is the table size of n-gram size n = i+2, head h.
	Primes [][]int64
	// Offsets[c], c = i*n_heads + h: exclusive cumulative sum of the primes in
	// (i, h) order; row of column c = (hash mod Primes[i][h]) + Offsets[c].
	Offsets []int64
	// Multipliers[s], s = 0..max_ngram-1: 2*v+1 with
	// v = numpy default_rng(10007*Layer).integers(0, bound, size=max_ngram, dtype=int64).
	Multipliers []int64
	// Rows is the sum of the primes (= engram_num_embeddings of the layer).
	Rows int64
}

// EngramMultiplierSeed is the per-layer seed factor of the reference.
const EngramMultiplierSeed = 10007

// EngramMultiplierBound returns max(1, (2^63-1) div compressed_vocab div 2),
// the exclusive upper bound of the random multiplier halves.
func EngramMultiplierBound(compressedVocab int64) int64 {
	return max(1, math.MaxInt64/compressedVocab/2)
}

// EngramLayout computes the constants of every Engram layer, in the order of
// engram_layer_ids. Primes: for each layer, for each n-gram size the search
// restarts at engram_vocab_size-1 and takes, head by head, the next prime
// greater than the previous one that no earlier (layer, n-gram, head) has
// taken; the result is the run of consecutive primes above
// engram_vocab_size-1, layer after layer.
func EngramLayout(c *Config) ([]EngramLayerConsts, error) {
	if len(c.EngramLayerIDs) == 0 {
		return nil, nil
	}
	switch {
	case c.EngramMaxNgramSize < 2:
		return nil, fmt.Errorf("engram_max_ngram_size: is %d, want >= 2 when engram_layer_ids is set", c.EngramMaxNgramSize)
	case c.EngramNHeads <= 0:
		return nil, fmt.Errorf("engram_n_heads: is %d, want > 0 when engram_layer_ids is set", c.EngramNHeads)
	case c.EngramVocabSize <= 0:
		return nil, fmt.Errorf("engram_vocab_size: is %d, want > 0 when engram_layer_ids is set", c.EngramVocabSize)
	case c.EngramCompressedVocabSize <= 0:
		return nil, fmt.Errorf("engram_compressed_vocab_size: is %d, want > 0 when engram_layer_ids is set", c.EngramCompressedVocabSize)
	}
	bound := EngramMultiplierBound(c.EngramCompressedVocabSize)
	seen := map[int64]bool{}
	out := make([]EngramLayerConsts, len(c.EngramLayerIDs))
	for slot, layer := range c.EngramLayerIDs {
		if layer < 0 {
			return nil, fmt.Errorf("engram_layer_ids: layer %d is negative", layer)
		}
		el := EngramLayerConsts{Layer: layer, Slot: slot}
		for i := 0; i < c.EngramMaxNgramSize-1; i++ {
			row := make([]int64, c.EngramNHeads)
			start := c.EngramVocabSize - 1
			for h := range row {
				p, err := nextUnseenPrime(start, seen)
				if err != nil {
					return nil, err
				}
				seen[p] = true
				row[h] = p
				start = p
				el.Offsets = append(el.Offsets, el.Rows)
				if el.Rows > math.MaxInt64-p {
					return nil, fmt.Errorf("engram_vocab_size: table rows of layer %d overflow int64", layer)
				}
				el.Rows += p
			}
			el.Primes = append(el.Primes, row)
		}
		v := NumpyIntegers(uint64(EngramMultiplierSeed)*uint64(layer), 0, bound, c.EngramMaxNgramSize)
		el.Multipliers = make([]int64, len(v))
		for s, x := range v {
			el.Multipliers[s] = 2*x + 1
		}
		out[slot] = el
	}
	return out, nil
}

// nextUnseenPrime returns the smallest prime > start that is not in seen.
func nextUnseenPrime(start int64, seen map[int64]bool) (int64, error) {
	var b big.Int
	for n := start + 1; n > 0; n++ {
		if seen[n] {
			continue
		}
		if isPrime(n, &b) {
			return n, nil
		}
	}
	return 0, fmt.Errorf("engram_vocab_size: no prime above %d fits in int64", start)
}

func isPrime(n int64, b *big.Int) bool {
	if n < 2 {
		return false
	}
	for _, p := range []int64{2, 3, 5, 7, 11, 13} {
		if n%p == 0 {
			return n == p
		}
	}
	// ProbablyPrime(0) (Baillie-PSW) is exact for n < 2^64.
	return b.SetInt64(n).ProbablyPrime(0)
}
