package ir

import (
	"strings"
	"testing"
)

// buffersText: %2 is read through its view %3 by %5, so its slot is busy
// until %5; %4 is an output (no slot).
const buffersText = `graph g {
  %0 = input {name="x"} : f32[B,4]
  %1 = relu(%0) {buf=0} : f32[B,4]
  %2 = relu(%1) {buf=1} : f32[B,4]
  %3 = reshape(%2) {shape="[B,2,2]"} : f32[B,2,2]
  %4 = relu(%1) : f32[B,4]
  %5 = relu(%3) {buf=0} : f32[B,2,2]
  %6 = probe(%5) {name="p"} : f32[B,2,2]
  output y = %4
}`

func TestCheckBuffers(t *testing.T) {
	cases := []struct{ old, new, want string }{
		{"", "", ""},
		// Slot 0 is free after %4, the last reader of %1.
		{"%5 = relu(%3) {buf=0}", "%5 = relu(%3) {buf=2}", ""},
		{"%2 = relu(%1) {buf=1}", "%2 = relu(%1) {buf=0}", "%2 (relu): takes buffer slot 0 while %1 (relu) in it is still read by %4 (relu)"},
		{"%5 = relu(%3) {buf=0}", "%5 = relu(%3) {buf=1}", "%5 (relu): takes buffer slot 1 while %2 (relu) in it is still read by %5 (relu)"},
		{"%5 = relu(%3) {buf=0}", "%5 = relu(%3)", "%5 (relu): has no buffer slot"},
		{"%5 = relu(%3) {buf=0}", "%5 = relu(%3) {buf=7}", "%5 (relu): buffer slot buf=7 out of range [0,7)"},
		{"%5 = relu(%3) {buf=0}", "%5 = relu(%3) {buf=-1}", "%5 (relu): buffer slot buf=-1 out of range"},
		{`%3 = reshape(%2) {shape="[B,2,2]"}`, `%3 = reshape(%2) {buf=2, shape="[B,2,2]"}`, "%3 (reshape): has buffer slot buf=2 but writes no new storage"},
		{"%4 = relu(%1) :", "%4 = relu(%1) {buf=2} :", "%4 (relu): is a graph output but has buffer slot buf=2"},
	}
	for _, c := range cases {
		m, err := Parse(strings.Replace(buffersText, c.old, c.new, 1))
		if err != nil {
			t.Fatalf("%q: %v", c.new, err)
		}
		err = CheckBuffers(m.Graphs[0])
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.new, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: got %v, want %q", c.new, err, c.want)
		}
	}
}

func TestStorageLifetimes(t *testing.T) {
	m, err := Parse(buffersText)
	if err != nil {
		t.Fatal(err)
	}
	lt := StorageLifetimes(m.Graphs[0])
	// Positions: the view %3 and probe %6 share their argument's root; %1
	// is last read by %4, %2 through its view by %5; %4 is pinned.
	wantRoot := []int{-1, 1, 2, 2, 4, 5, 5}
	for i, r := range wantRoot {
		if lt.Root[i] != r {
			t.Errorf("Root[%d] = %d, want %d", i, lt.Root[i], r)
		}
	}
	if lt.Last[1] != 4 || lt.Last[2] != 5 || lt.Last[5] != 6 {
		t.Errorf("Last = %v", lt.Last)
	}
	if !lt.Pinned[4] || lt.NeedsSlot(4) || !lt.NeedsSlot(5) || lt.NeedsSlot(3) {
		t.Errorf("Pinned = %v", lt.Pinned)
	}
}
