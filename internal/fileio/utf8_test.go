package fileio

import "testing"

func TestInvalidUTF8(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", -1},
		{"héllo €", -1},
		{"ab\xffc", 2},
		{"é\xe2\x82", 2},      // a rune cut short
		{"a\xed\xa0\x80b", 1}, // a surrogate
	} {
		if got := InvalidUTF8([]byte(c.in)); got != c.want {
			t.Errorf("InvalidUTF8(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}
