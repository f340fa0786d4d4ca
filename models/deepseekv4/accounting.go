package deepseekv4

import (
	"fmt"
	"math"
	"strings"

	"github.com/ds4go/ds4/ir"
)

// Component is one node of the parameter accounting tree. Params counts one
// instance; the component contributes Params × Instances to its parent.
type Component struct {
	Name      string       `json:"name"`
	Params    int64        `json:"params"`
	Instances int64        `json:"instances"`
	Children  []*Component `json:"children,omitempty"`
}

// Total is Params × Instances, saturating at math.MaxInt64 (Validate's
// bounds keep real configs far below; the accounting never wraps).
func (c *Component) Total() int64 { return ir.SatMul(c.Params, c.Instances) }

// Accounting is the parameter count of the text path, computed from the
// weight declarations of a graph and grouped as the model page groups it.
type Accounting struct {
	Total        int64        `json:"total"`
	Backbone     int64        `json:"backbone"`      // everything but the Engram tables
	EngramTables int64        `json:"engram_tables"` // the n-gram embedding tables
	Components   []*Component `json:"components"`
	Ignored      []string     `json:"ignored,omitempty"`
}

func (c *Component) child(name string) *Component {
	for _, ch := range c.Children {
		if ch.Name == name {
			return ch
		}
	}
	ch := &Component{Name: name, Instances: 1}
	c.Children = append(c.Children, ch)
	return ch
}

// sum fills Params of inner nodes from their children.
func (c *Component) sum() {
	if len(c.Children) == 0 {
		return
	}
	c.Params = 0
	for _, ch := range c.Children {
		ch.sum()
		c.Params = ir.SatAdd(c.Params, ch.Total())
	}
}

func (c *Component) signature() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d×%d(", c.Name, c.Params, c.Instances)
	for _, ch := range c.Children {
		b.WriteString(ch.signature())
	}
	b.WriteString(")")
	return b.String()
}

// kindLabel names the layer groups of the accounting tree.
func kindLabel(L LayerInfo) string {
	switch L.Kind {
	case KindFull:
		return fmt.Sprintf("full layer (ratio %d)", L.Ratio)
	case KindReindex:
		return "re-indexing layer"
	case KindReuse:
		return "reuse layer"
	}
	return "sliding-window layer"
}

// Account computes the parameter accounting from the weight declarations of g.
func Account(c *Config, g *ir.Graph) *Accounting {
	layers := c.Layers()
	root := &Component{Name: "text model", Instances: 1}
	perLayer := map[int]*Component{}
	engram := map[int]*Component{}
	acc := &Accounting{Ignored: c.IgnoredParts()}
	for _, n := range g.Nodes {
		if n.Op != "weight" || n.Attrs.Str("format", "") == "i64" {
			continue
		}
		count, _ := n.Type.Shape.NumElements() // saturating
		layer := int(n.Attrs.Int("layer", -1))
		path := strings.Split(n.Attrs.Str("component", n.Attrs.Str("name", "")), "/")
		var at *Component
		switch {
		case layer < 0:
			at = root
		case path[0] == "engram":
			if engram[layer] == nil {
				engram[layer] = &Component{Name: fmt.Sprintf("engram (layer %d)", layer), Instances: 1}
			}
			at, path = engram[layer], path[1:]
		default:
			if perLayer[layer] == nil {
				perLayer[layer] = &Component{Name: fmt.Sprintf("layer %d", layer), Instances: 1}
			}
			at = perLayer[layer]
		}
		for i, p := range path {
			at = at.child(p)
			if e := n.Attrs.Int("experts", 0); e > 0 && i == len(path)-2 {
				at.Instances = e
				count /= e
			}
		}
		at.Params = count
		if path[len(path)-1] == "table" {
			acc.EngramTables = ir.SatAdd(acc.EngramTables, count)
		}
	}
	for _, lc := range perLayer {
		for _, ch := range lc.Children {
			if strings.HasPrefix(ch.Name, "hc_") {
				splitMixes(ch, int64(c.HCMult))
			}
		}
	}
	// Group identical layers by kind: one component per kind with its
	// instance count, as the model page does.
	var groups []*Component
	bySig := map[string]*Component{}
	for _, L := range layers {
		lc := perLayer[L.Index]
		if lc == nil {
			continue
		}
		lc.sum()
		label := kindLabel(L)
		lc.Name = label
		sig := lc.signature()
		if gc, ok := bySig[sig]; ok {
			gc.Instances++
			continue
		}
		lc.Name = label
		for _, gc := range groups {
			if gc.Name == label { // same kind, different sizes: name the layer
				lc.Name = fmt.Sprintf("%s %d", label, L.Index)
			}
		}
		bySig[sig] = lc
		groups = append(groups, lc)
	}
	var comps []*Component
	for _, ch := range root.Children {
		if ch.Name == "embedding" {
			comps = append(comps, ch)
		}
	}
	comps = append(comps, groups...)
	for _, L := range layers {
		if e := engram[L.Index]; e != nil {
			e.sum()
			comps = append(comps, e)
		}
	}
	for _, ch := range root.Children {
		if ch.Name != "embedding" {
			comps = append(comps, ch)
		}
	}
	for _, ch := range comps {
		ch.sum()
		acc.Total = ir.SatAdd(acc.Total, ch.Total())
	}
	acc.Components = comps
	acc.Backbone = acc.Total - acc.EngramTables
	return acc
}

// splitMixes regroups a hyper-connection's tensors (fn, base [24], scale
// [3]) as the model page does: the mix projection (fn) and, for each of the
// three mixes, its slice of base plus its one scale — pre hc+1, post hc+1,
// comb hc²+1 parameters.
func splitMixes(hc *Component, n int64) {
	var fn, base, scale *Component
	for _, ch := range hc.Children {
		switch ch.Name {
		case "fn":
			fn = ch
		case "base":
			base = ch
		case "scale":
			scale = ch
		}
	}
	if fn == nil || base == nil || scale == nil || base.Params != (2+n)*n || scale.Params != 3 {
		return
	}
	fn.Name = "mix_projection"
	hc.Children = []*Component{fn,
		{Name: "pre", Params: n + 1, Instances: 1},
		{Name: "post", Params: n + 1, Instances: 1},
		{Name: "comb", Params: n*n + 1, Instances: 1}}
}

// Format prints the accounting as an indented tree.
func (a *Accounting) Format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "total %s parameters (backbone %s + Engram tables %s)\n", group3(a.Total), group3(a.Backbone), group3(a.EngramTables))
	var walk func(c *Component, depth int)
	walk = func(c *Component, depth int) {
		ind := strings.Repeat("  ", depth)
		if c.Instances > 1 {
			fmt.Fprintf(&b, "%s%s: %s × %d = %s\n", ind, c.Name, group3(c.Params), c.Instances, group3(c.Total()))
		} else {
			fmt.Fprintf(&b, "%s%s: %s\n", ind, c.Name, group3(c.Params))
		}
		for _, ch := range c.Children {
			walk(ch, depth+1)
		}
	}
	for _, c := range a.Components {
		walk(c, 1)
	}
	for _, s := range a.Ignored {
		fmt.Fprintf(&b, "not counted: %s\n", s)
	}
	return b.String()
}

func group3(n int64) string {
	if n == math.MaxInt64 {
		return "more than 9.2e18 (overflow)"
	}
	s := fmt.Sprint(n)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
