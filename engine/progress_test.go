package engine

import (
	"bytes"
	"strings"
	"testing"
	"time"
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

// TestPrefillProgress checks the chunked prefill's line: tokens done and
// time left while it runs, a newline at the end; nothing for a prefill
// that ended before the line was due.
func TestPrefillProgress(t *testing.T) {
	var buf bytes.Buffer
	ProgressOutput = &buf
	defer func() { ProgressOutput = nil }()
	quick := newPrefillProgress(1024)
	quick.done(1024)
	if buf.Len() != 0 {
		t.Fatalf("a quick prefill printed %q", buf.String())
	}
	p := newPrefillProgress(1024)
	p.start = p.start.Add(-time.Second) // past the delay
	p.done(512)
	p.done(1024)
	out := buf.String()
	if !strings.Contains(out, "prefill: 512/1024 tokens") || !strings.Contains(out, "left") || !strings.Contains(out, "prefill: 1024/1024 tokens") || !strings.HasSuffix(out, "\n") {
		t.Errorf("progress output %q", out)
	}
}
