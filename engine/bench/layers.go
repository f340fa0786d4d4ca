package bench

import (
	"sort"
	"strings"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/ir"
)

// LayerTimeFigure is the kernel time of one layer's nodes per decoded
// token (Options.LayerTimes). Layer -1 is what runs outside the layers
// (embedding, final norm, head).
type LayerTimeFigure struct {
	Layer int `json:"layer"`
	// Parts names the optional parts the layer has weights of, from their
	// components: "compressor", "indexer", "engram" (a sliding-window layer
	// and a layer reusing another's cache have none; the layer's
	// compress ratio is the config's).
	Parts         []string `json:"parts"`
	KernelsPerTok float64  `json:"kernels_per_token"` // nodes timed per token
	MsPerToken    float64  `json:"ms_per_token"`
	Share         float64  `json:"share"` // of the decode wall time
}

// nodeLayers assigns each node of g a layer: a node reading weights
// belongs to their layer (the largest of them), any other node to the
// largest layer of its arguments (the stream flows forward), a node with
// neither to -1.
func nodeLayers(g *ir.Graph) map[*ir.Node]int {
	out := make(map[*ir.Node]int, len(g.Nodes))
	for _, n := range g.Nodes {
		if n.Op == "weight" {
			out[n] = int(n.Attrs.Int("layer", -1))
			continue
		}
		l, lw, hasW := -1, -1, false
		for _, a := range n.Args {
			if a.Op == "weight" {
				hasW, lw = true, max(lw, out[a])
				continue
			}
			if al, ok := out[a]; ok {
				l = max(l, al)
			}
		}
		if hasW {
			l = lw
		}
		out[n] = l
	}
	return out
}

// layerParts lists, per layer, the optional parts its weights show.
func layerParts(g *ir.Graph) map[int][]string {
	seen := map[int]map[string]bool{}
	for _, n := range g.Weights() {
		l := int(n.Attrs.Int("layer", -1))
		c := n.Attrs.Str("component", "")
		for _, p := range []string{"compressor", "indexer", "engram"} {
			if strings.Contains(c, p) {
				if seen[l] == nil {
					seen[l] = map[string]bool{}
				}
				seen[l][p] = true
			}
		}
	}
	out := map[int][]string{}
	for l, ps := range seen {
		for _, p := range []string{"compressor", "indexer", "engram"} {
			if ps[p] {
				out[l] = append(out[l], p)
			}
		}
	}
	return out
}

// layerTimeFigures sums node times by layer, in layer order (nil when
// nothing was timed).
func layerTimeFigures(g *ir.Graph, times map[*ir.Node]*backends.OpTime, tokens, seconds float64) []LayerTimeFigure {
	if len(times) == 0 {
		return nil
	}
	layers, parts := nodeLayers(g), layerParts(g)
	by := map[int]*LayerTimeFigure{}
	for n, t := range times {
		l, ok := layers[n]
		if !ok {
			l = -1
		}
		f := by[l]
		if f == nil {
			f = &LayerTimeFigure{Layer: l, Parts: parts[l]}
			if f.Parts == nil {
				f.Parts = []string{}
			}
			by[l] = f
		}
		f.KernelsPerTok += float64(t.Calls) / tokens
		f.MsPerToken += float64(t.Nanos) / 1e6 / tokens
		f.Share += float64(t.Nanos) / 1e9 / seconds
	}
	var out []LayerTimeFigure
	for _, f := range by {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Layer < out[j].Layer })
	return out
}
