package engine

import (
	"fmt"

	"github.com/ds4go/ds4/ir"
)

// lastLogits is a copy of a prefill or chunk graph g whose logits output
// is the last position's only, [B,1,V] instead of [B,S,V]: the head's
// input goes through a `last` node (axis 1) first. Generation samples the
// last position alone, and the head over every position is most of a
// prompt's FLOPs and the largest activation (S·V·4 bytes) at real widths,
// so sessions run this form unless they record every position's logits
// (a tracer, Options.FullLogits). The plan's graph is left untouched; the
// copy shares nothing with it, and the new node takes a buffer slot no
// other node uses (the assignment of the plan stays valid around it). A
// graph whose logits are not a product over [B,S,·] comes back as it is.
func lastLogits(g *ir.Graph) (*ir.Graph, error) {
	m, err := ir.Parse(ir.Format(&ir.Module{Graphs: []*ir.Graph{g}}))
	if err != nil {
		return nil, fmt.Errorf("graph %s: copying it: %v", g.Name, err)
	}
	c := m.Graphs[0]
	var head *ir.Node
	for _, o := range c.Outputs {
		if o.Name == "logits" {
			head = o.Node
		}
	}
	if head == nil || len(head.Args) == 0 || head.Type.Shape.Rank() != 3 || head.Args[0].Type.Shape.Rank() != 3 {
		return g, nil // not a head over positions (a hand-made plan): run it as it is
	}
	at := -1
	slot := int64(-1)
	for i, n := range c.Nodes {
		if n == head {
			at = i
		}
		if s, ok := n.Attrs["buf"].(int64); ok && s > slot {
			slot = s
		}
	}
	x := head.Args[0]
	last := &ir.Node{Op: "last", Args: []*ir.Node{x}, Attrs: ir.Attrs{"axis": int64(1)}}
	if slot >= 0 { // a plan's graph (passes.AssignBuffers); graphs made in memory may have none
		last.Attrs["buf"] = slot + 1
	}
	if last.Type, err = ir.Ops["last"].Infer(last); err != nil {
		return nil, fmt.Errorf("graph %s: the head's input %%%d: %v", g.Name, x.ID, err)
	}
	c.Append(last) // an ID of its own, then moved before the head
	c.Nodes = append(c.Nodes[:len(c.Nodes)-1], nil)
	copy(c.Nodes[at+1:], c.Nodes[at:])
	c.Nodes[at] = last
	head.Args[0] = last
	if head.Type, err = head.Info().Infer(head); err != nil {
		return nil, fmt.Errorf("graph %s: the head %%%d on the last position: %v", g.Name, head.ID, err)
	}
	if err := ir.Verify(c); err != nil {
		return nil, fmt.Errorf("graph %s on the last position: %v", g.Name, err)
	}
	if err := ir.CheckBuffers(c); slot >= 0 && err != nil {
		return nil, fmt.Errorf("graph %s on the last position: %v", g.Name, err)
	}
	return c, nil
}
