package jsonx

import (
	"strings"
	"testing"
)

type sample struct {
	Dim     int      `json:"dim"`
	Ratios  []int    `json:"compress_ratios"`
	Name    string   `json:"name,omitempty"`
	Ratio   *float64 `json:"ratio"`
	Flag    bool     `json:"flag"`
	Inner   inner    `json:"inner"`
	Skipped string   `json:"-"`
}

type inner struct {
	N int `json:"n"`
}

func TestDecodeRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"dim": "128"}`, `field "dim": want an integer, got string`},
		{`{"dim": 1e12}`, `field "dim": want an integer (digits only, within ±9223372036854775807), got 1e12`},
		{`{"dim": 9223372036854775808}`, `field "dim": want an integer (digits only`},
		{`{"dim": null}`, `field "dim": null, want an integer`},
		{`{"compress_ratios": null}`, `field "compress_ratios": null, want a list of integers`},
		{`{"compress_ratios": 3}`, `field "compress_ratios": want a list of integers, got number`},
		{`{"compress_ratios": [1, "x"]}`, `field "compress_ratios": want an integer, got string`},
		{`{"flag": 1}`, `field "flag": want true or false, got number`},
		{`{"dimm": 1}`, `field "dimm": unknown field (did you mean "dim"?)`},
		{`{"DIM": 1}`, `field "DIM": unknown field (did you mean "dim"?)`},
		{`{"zzzzzz": 1}`, `field "zzzzzz": unknown field`},
		{`{"Skipped": "x"}`, `field "Skipped": unknown field`},
		{`{"inner": {"m": 1}}`, `field "inner.m": unknown field`},
		{`{"inner": {"n": "x"}}`, `field "inner.n": want an integer, got string`},
		{`{"dim": 1, "dim": 2}`, `field "dim": given twice`},
		{`{"dim": 1} {}`, `invalid JSON at byte`},
		{`{"dim": 1`, `invalid JSON at byte 9: unexpected end of data`},
		{`{"dim": 1,}`, `invalid JSON at byte`},
		{`null`, `top level is null, want an object`},
		{`[1]`, `top level is a list, want an object`},
		{``, `invalid JSON at byte 0: unexpected end of data`},
	} {
		var s sample
		err := Decode([]byte(tc.in), &s)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Decode(%s) = %v, want prefix %q", tc.in, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "struct")) {
			t.Errorf("Decode(%s): Go type words in %q", tc.in, err)
		}
	}
}

func TestDecodeAccepts(t *testing.T) {
	s := sample{Dim: 7, Name: "keep"}
	if err := Decode([]byte(`{"dim": 128, "ratio": null, "compress_ratios": [1,2], "inner": {"n": 3}}`), &s); err != nil {
		t.Fatal(err)
	}
	if s.Dim != 128 || s.Name != "keep" || s.Ratio != nil || len(s.Ratios) != 2 || s.Inner.N != 3 {
		t.Errorf("decoded %+v", s)
	}
}
