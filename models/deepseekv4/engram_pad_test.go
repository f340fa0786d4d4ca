package deepseekv4_test

import (
	"testing"

	"github.com/ds4go/ds4/models/deepseekv4"
)

// TestEngramPadIsMapped: missing n-gram history is padded with
// token_map[engram_pad_id] (the reference's pad), not the raw id. The tiny
// golden set cannot catch this (its map has map[2] = 2); a reference run on
// another checkpoint did.
func TestEngramPadIsMapped(t *testing.T) {
	c, err := deepseekv4.LoadConfig("testdata/configs/deepseek-v41-flash.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range []deepseekv4.Phase{deepseekv4.Prefill, deepseekv4.Decode} {
		g, err := deepseekv4.BuildGraph(c, ph)
		if err != nil {
			t.Fatal(err)
		}
		hashes := 0
		for _, n := range g.Nodes {
			if n.Op != "engram_hash" {
				continue
			}
			hashes++
			pad := n.Args[3]
			if pad.Op != "token_map" || pad.Args[0].Attrs.Str("name", "") != "token_map" {
				t.Fatalf("%s: engram_hash pad is %s, want token_map of the Engram map", ph, pad.Op)
			}
			if ids := pad.Args[1].Attrs.Ints("ints"); len(ids) != 1 || ids[0] != int64(c.EngramPadID) {
				t.Errorf("%s: pad maps ids %v, want [%d]", ph, ids, c.EngramPadID)
			}
		}
		if hashes != len(c.EngramLayerIDs) {
			t.Errorf("%s: %d engram_hash nodes, want %d", ph, hashes, len(c.EngramLayerIDs))
		}
	}
}
