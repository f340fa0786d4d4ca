package deepseekv4

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

type engramHashConsts struct {
	multipliers, primes, offsets []int64
}

// engramConsts flattens the hashing constants of one Engram layer into the
// attributes of its engram_hash node.
func engramConsts(e EngramLayerConsts) engramHashConsts {
	var primes []int64
	for _, row := range e.Primes {
		primes = append(primes, row...)
	}
	return engramHashConsts{multipliers: e.Multipliers, primes: primes, offsets: e.Offsets}
}

// Fingerprint is a short hash of the model fields of the config, recorded in
// plans so that a plan is not run against a different model.
func (c *Config) Fingerprint() string {
	cc := *c
	cc.Source, cc.MaxBatchSize, cc.MaxSeqLen, cc.Temperature = "", 0, 0, 0
	data, _ := json.Marshal(&cc)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
