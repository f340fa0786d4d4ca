package engine

import (
	"bytes"
	"strings"
	"testing"
)

// TestLoadProgress checks the progress line goes to ProgressOutput and ends
// with a newline once something was shown.
func TestLoadProgress(t *testing.T) {
	var buf bytes.Buffer
	ProgressOutput = &buf
	defer func() { ProgressOutput = nil }()
	md := openTiny(t)
	p := newLoadProgress(md.w, md.pg, md.dg)
	if p.all == 0 || p.total <= 0 || p.mapped <= 0 {
		t.Fatalf("progress counts %d tensors, %d bytes, %d mapped", p.all, p.total, p.mapped)
	}
	for _, n := range md.pg.Nodes {
		if n.Op == "weight" {
			p.bound(n)
		}
	}
	p.show(false)
	p.done()
	out := buf.String()
	if !strings.Contains(out, "binding weights:") || !strings.HasSuffix(out, "\n") {
		t.Errorf("progress output %q", out)
	}
}
