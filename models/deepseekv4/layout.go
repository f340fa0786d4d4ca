package deepseekv4

import "fmt"

// LayerKind is the attention mode of a backbone layer (spec §3).
type LayerKind int

const (
	// KindSWA: compress ratio 0, sliding-window attention only.
	KindSWA LayerKind = iota
	// KindFull: a kv source; owns a Compressor (and, when it is also an index
	// source, the indexer keys).
	KindFull
	// KindReuse: ratio > 0, not a source; reads the most recent kv source's
	// compressed KV and the most recent index source's top-k.
	KindReuse
	// KindReindex: an index source that is not a kv source; runs its own
	// indexer on another layer's index keys.
	KindReindex
)

func (k LayerKind) String() string {
	switch k {
	case KindSWA:
		return "swa"
	case KindFull:
		return "full"
	case KindReuse:
		return "reuse"
	case KindReindex:
		return "reindex"
	}
	return fmt.Sprintf("LayerKind(%d)", int(k))
}

// LayerInfo describes one backbone layer as the reference builds it (spec §3).
// Every *From field is a layer index, or -1 when the layer has no such input.
type LayerInfo struct {
	Index int
	Ratio int // compress_ratios[Index]

	KVSource        bool // owns a Compressor and a compress_kv cache
	IndexSource     bool // owns an Indexer
	OwnsIndexK      bool // its indexer has wk/k_norm/k_cache (index source and kv source)
	CandidateSource bool // builds the candidate block pool (== candidate_source_layer)
	UsesCandidates  bool // index source with 0 <= candidate_source_layer < Index

	KVFrom         int // layer whose compress_kv this layer attends to (most recent kv source <= Index); -1 if ratio 0
	IndexKFrom     int // index sources: layer whose k_cache keys are scored (self if owner, else most recent owner); else -1
	TopKFrom       int // layer whose topk_idxs are used (self if index source, else most recent index source); -1 if ratio 0
	CandidatesFrom int // candidate_source_layer when UsesCandidates, else -1

	Engram     bool // has an Engram module (applied to the stream before the block)
	EngramSlot int  // position in engram_layer_ids, or -1

	Kind LayerKind
}

// Layers returns the layout of the backbone layers 0..n_layers-1 (MTP layers
// excluded). It follows the reference's forward-order rules even for an
// invalid config; Validate reports inconsistencies (a -1 where an input is
// needed, a source of another ratio).
func (c *Config) Layers() []LayerInfo {
	n := max(c.NLayers, 0)
	kv := indexSet(c.KVSourceLayers)
	idx := indexSet(c.IndexSourceLayers)
	eng := map[int]int{}
	for i, l := range c.EngramLayerIDs {
		if _, dup := eng[l]; !dup {
			eng[l] = i
		}
	}
	out := make([]LayerInfo, n)
	lastKV, lastIdx, lastOwner := -1, -1, -1
	for l := 0; l < n; l++ {
		li := LayerInfo{Index: l, KVFrom: -1, IndexKFrom: -1, TopKFrom: -1, CandidatesFrom: -1, EngramSlot: -1}
		if l < len(c.CompressRatios) {
			li.Ratio = c.CompressRatios[l]
		}
		li.KVSource = kv[l]
		li.IndexSource = idx[l]
		li.OwnsIndexK = li.IndexSource && li.KVSource
		li.CandidateSource = li.IndexSource && l == c.CandidateSourceLayer
		li.UsesCandidates = li.IndexSource && c.CandidateSourceLayer >= 0 && c.CandidateSourceLayer < l
		if li.KVSource {
			lastKV = l
		}
		if li.OwnsIndexK {
			lastOwner = l
		}
		if li.IndexSource {
			lastIdx = l
			li.IndexKFrom = lastOwner
		}
		if li.Ratio > 0 {
			li.KVFrom = lastKV
			li.TopKFrom = lastIdx
		}
		if li.UsesCandidates {
			li.CandidatesFrom = c.CandidateSourceLayer
		}
		if s, ok := eng[l]; ok {
			li.Engram, li.EngramSlot = true, s
		}
		switch {
		case li.Ratio == 0:
			li.Kind = KindSWA
		case li.KVSource:
			li.Kind = KindFull
		case li.IndexSource:
			li.Kind = KindReindex
		default:
			li.Kind = KindReuse
		}
		out[l] = li
	}
	return out
}

func indexSet(ids []int) map[int]bool {
	m := make(map[int]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// LayoutSummary counts the layers of each kind, e.g. "2 swa, 4 full, 4 reindex, 30 reuse".
func LayoutSummary(layers []LayerInfo) string {
	var n [4]int
	for _, l := range layers {
		if l.Kind >= 0 && int(l.Kind) < len(n) {
			n[l.Kind]++
		}
	}
	return fmt.Sprintf("%d %s, %d %s, %d %s, %d %s", n[KindSWA], KindSWA, n[KindFull], KindFull,
		n[KindReindex], KindReindex, n[KindReuse], KindReuse)
}

// validateLayout checks the per-layer wiring: every compressed layer must
// find a kv source, index keys and a top-k of its own ratio.
func (c *Config) validateLayout() error {
	layers := c.Layers()
	ratioOf := func(l int) int { return layers[l].Ratio }
	for _, li := range layers {
		l, r := li.Index, li.Ratio
		if r == 0 {
			continue
		}
		if li.KVFrom < 0 {
			return fmt.Errorf("compress_ratios: layer %d (ratio %d, %s) has no earlier kv source (kv_source_layers) to read compressed KV from", l, r, li.Kind)
		}
		if rr := ratioOf(li.KVFrom); rr != r {
			return fmt.Errorf("kv_source_layers: layer %d (ratio %d, %s) would read compressed KV of layer %d, which has ratio %d", l, r, li.Kind, li.KVFrom, rr)
		}
		if li.TopKFrom < 0 {
			return fmt.Errorf("index_source_layers: layer %d (ratio %d, %s) has no earlier index source to take its top-k from", l, r, li.Kind)
		}
		if rr := ratioOf(li.TopKFrom); rr != r {
			return fmt.Errorf("index_source_layers: layer %d (ratio %d, %s) would use the top-k of layer %d, which has ratio %d", l, r, li.Kind, li.TopKFrom, rr)
		}
		if li.IndexSource {
			if li.IndexKFrom < 0 {
				return fmt.Errorf("index_source_layers: layer %d (ratio %d) is an index source with no earlier index-key owner (a layer in both kv_source_layers and index_source_layers)", l, r)
			}
			if rr := ratioOf(li.IndexKFrom); rr != r {
				return fmt.Errorf("index_source_layers: layer %d (ratio %d) would score the index keys of layer %d, which has ratio %d", l, r, li.IndexKFrom, rr)
			}
		}
		if li.UsesCandidates {
			if rr := ratioOf(li.CandidatesFrom); rr != r {
				return fmt.Errorf("candidate_source_layer: layer %d (ratio %d) would use the candidates of layer %d, which has ratio %d", l, r, li.CandidatesFrom, rr)
			}
		}
	}
	return nil
}
