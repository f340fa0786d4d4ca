package cuda

import (
	"path/filepath"
	"testing"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
)

// TestReleasedGraphsPlacedWhollyOnGPU: after the default passes, every node
// of the tiny and unseen6 prefill and decode graphs is placed on cuda: one
// segment, no transfer (no GPU needed: placement is data).
func TestReleasedGraphsPlacedWhollyOnGPU(t *testing.T) {
	for _, dir := range []string{"tiny", "unseen6"} {
		_, m := dstest.DefaultModule(t, filepath.Join(dstest.RepoRoot(), "testdata", dir))
		for _, name := range []string{"prefill", "decode"} {
			g := m.Graph(name)
			pl, err := backends.Schedule(g, "cuda")
			if err != nil {
				t.Fatalf("%s %s: %v", dir, name, err)
			}
			for _, n := range g.Nodes {
				if be := pl.Backend[n]; be != "cuda" {
					t.Errorf("%s %s: %%%d (%s %s) placed on %s", dir, name, n.ID, n.Op, n.Type, be)
				}
			}
			if len(pl.Segments) != 1 || len(pl.Transfers) != 0 {
				t.Errorf("%s %s: %d segments, %d transfers, want 1 and 0", dir, name, len(pl.Segments), len(pl.Transfers))
			}
			t.Logf("%s %s: %d nodes, all on cuda", dir, name, len(g.Nodes))
		}
	}
}
