package driver

import (
	"strings"
	"testing"
	"unsafe"
)

// TestTapeRecords: a stream with a tape records launches, copies, memsets
// and uploads instead of running them (no GPU needed), and tapes compare by
// structure and by each operation's parameters.
func TestTapeRecords(t *testing.T) {
	f, g := Function{h: 1, Name: "f"}, Function{h: 2, Name: "g"}
	rec := func(pos int, fn Function) *Tape {
		s := &Stream{}
		tp := &Tape{}
		s.BeginTape(tp)
		if err := s.Memset(100, 0, 16, "flags"); err != nil {
			t.Fatal(err)
		}
		if err := s.Upload(200, []byte{byte(pos), 0, 0, 0}, "positions"); err != nil {
			t.Fatal(err)
		}
		if err := s.Launch(fn, Dim3{1, 1, 1}, Dim3{32, 1, 1}, 0, "op", P(300), I(pos)); err != nil {
			t.Fatal(err)
		}
		if err := s.LaunchBytes(f, Dim3{2, 1, 1}, Dim3{64, 1, 1}, 0, "op2", []byte{1, 2, 3}, []byte{4}); err != nil {
			t.Fatal(err)
		}
		if err := s.Copy(400, 500, 8, "copy"); err != nil {
			t.Fatal(err)
		}
		if err := s.Copy(400, 500, 0, "empty"); err != nil { // a no-op: not recorded
			t.Fatal(err)
		}
		if s.EndTape() != tp || s.tape != nil {
			t.Fatal("EndTape did not stop the recording")
		}
		return tp
	}
	a, b, c := rec(3, f), rec(4, f), rec(3, g)
	if a.Len() != 5 || a.Broken() {
		t.Fatalf("tape of %d operations (broken %v), want 5", a.Len(), a.Broken())
	}
	if got := string(a.param(a.ops[3].p0 + 1)); got != "\x04" {
		t.Fatalf("LaunchBytes parameter 1 = %q", got)
	}
	if got := a.param(a.ops[2].p0 + 1); len(got) != 8 || got[0] != 3 {
		t.Fatalf("Launch parameter 1 = %v", got)
	}
	if string(a.stage) != "\x03\x00\x00\x00" || string(b.stage) != "\x04\x00\x00\x00" {
		t.Fatalf("staged uploads %v, %v", a.stage, b.stage)
	}
	if !sameStructure(a, b) || sameStructure(a, c) {
		t.Fatal("structure: a and b must match (same functions), a and c not")
	}
	// the position's upload differs only in its bytes (the step block), the
	// launch in a scalar: one node to update
	if d := diffs(a, b); d != 1 {
		t.Fatalf("%d operations differ between positions 3 and 4, want 1 (the launch's scalar)", d)
	}
	var u Tape
	u.copyFrom(a)
	if diffs(&u, a) != 0 || !sameStructure(&u, a) {
		t.Fatal("a copy of a tape differs from it")
	}
	a.Reset()
	if a.Len() != 0 || len(a.params) != 0 || len(a.stage) != 0 {
		t.Fatal("Reset left operations")
	}
}

// copyFrom makes t a copy of u's operations and parameters (no stage).
func (t *Tape) copyFrom(u *Tape) {
	t.ops = append(t.ops[:0], u.ops...)
	t.params = append(t.params[:0], u.params...)
	t.poff = append(t.poff[:0], u.poff...)
	t.step = u.step
}

// TestRecordingSliceAppend: what a tape recorded since a mark is copied
// and appended to another tape as if its launcher had run there.
func TestRecordingSliceAppend(t *testing.T) {
	f := Function{h: 1, Name: "f"}
	s := &Stream{}
	a, b := &Tape{}, &Tape{}
	s.BeginTape(a)
	s.Launch(f, Dim3{1, 1, 1}, Dim3{32, 1, 1}, 0, "first", P(1))
	m := a.Mark()
	s.Launch(f, Dim3{2, 1, 1}, Dim3{32, 1, 1}, 0, "second", P(2), I(3))
	s.Copy(10, 20, 8, "copy")
	var r Recording
	if !a.Slice(m, &r) || r.Len() != 2 {
		t.Fatalf("Slice: %d operations", r.Len())
	}
	if !a.Same(m, &r) {
		t.Fatal("a tape differs from its own recording")
	}
	s.Upload(30, []byte{1}, "upload")
	var r2 Recording
	if a.Slice(m, &r2) {
		t.Fatal("a recording with an upload was accepted")
	}
	s.EndTape()
	s.BeginTape(b)
	s.Launch(f, Dim3{1, 1, 1}, Dim3{32, 1, 1}, 0, "other", P(9), I(9), I(9))
	b.Append(&r)
	s.EndTape()
	if b.Len() != 3 || string(b.param(b.ops[1].p0)) != string(a.param(a.ops[1].p0)) || string(b.param(b.ops[1].p0+1)) != string(a.param(a.ops[1].p0+1)) {
		t.Fatalf("appended recording: %d operations, params %v", b.Len(), b.params)
	}
	if b.ops[2].kind != opCopy || b.ops[2].dst != 10 {
		t.Fatalf("appended copy %+v", b.ops[2])
	}
}

// TestUpdateRejected: a node update the driver refuses makes update report
// false and RunTape's caller can read which (Graphs.Rejected); no GPU (the
// driver's update function is stubbed).
func TestUpdateRejected(t *testing.T) {
	kern, mset := cu.execKernelSetParams, cu.execMemsetSetParams
	defer func() { cu.execKernelSetParams, cu.execMemsetSetParams = kern, mset }()
	cu.execKernelSetParams = func(uintptr, uintptr, unsafe.Pointer) Result { return Success }
	cu.execMemsetSetParams = func(uintptr, uintptr, unsafe.Pointer, uintptr) Result { return 1 }
	rec := func(n int) *Tape {
		s := &Stream{}
		tp := &Tape{}
		s.BeginTape(tp)
		if err := s.Memset(100, 0, n, "head"); err != nil {
			t.Fatal(err)
		}
		s.EndTape()
		return tp
	}
	a, b := rec(16), rec(32)
	g := &Graph{nodes: []uintptr{1}}
	g.take(a)
	if diffs(&g.tape, b) != 1 {
		t.Fatal("the memset sizes do not differ")
	}
	s := &Stream{c: &Context{}}
	ok, err := s.update(g, b)
	if ok || err != nil || s.rejected == nil {
		t.Fatalf("update of a refused node: ok %v, err %v, rejected %v", ok, err, s.rejected)
	}
	if msg := s.rejected.Error(); !strings.Contains(msg, "cuGraphExecMemsetNodeSetParams") || !strings.Contains(msg, "head") {
		t.Errorf("rejected = %q", msg)
	}
}
