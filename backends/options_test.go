package backends

import (
	"slices"
	"testing"
)

func TestOptions(t *testing.T) {
	SetOptions(map[string]string{"cuda-graphs": "false", "x": "1", "bad": "maybe"})
	defer SetOptions(nil)
	if v, err := BoolOption("cuda-graphs", true); err != nil || v {
		t.Fatalf("cuda-graphs = %v, %v; want false", v, err)
	}
	if v, err := BoolOption("absent", true); err != nil || !v {
		t.Fatalf("absent = %v, %v; want the default true", v, err)
	}
	if _, err := BoolOption("bad", true); err == nil {
		t.Fatal("bad=maybe accepted as a boolean")
	}
	if got := Unread(); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("Unread = %v, want [x]", got)
	}
	SetOptions(nil)
	if got := Unread(); len(got) != 0 {
		t.Fatalf("after SetOptions(nil): Unread = %v", got)
	}
}
