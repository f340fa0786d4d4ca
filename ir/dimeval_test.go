package ir

import (
	"math"
	"testing"
)

func TestBindingsExpr(t *testing.T) {
	b := Bindings{B: 2, S: 5, M: 64, P: 7}
	for s, want := range map[string]int64{
		"B": 2, "S": 5, "M": 64, "P": 7, "M/2": 32, "B*S": 10, "(P+S)/2": 6, "(P+1)/2-P/2": 1,
		"min(S,128)": 5, "max(S,128)": 128, "min(4,(P+1)/2)+8": 12, "S+(P+S)/2": 11, "12": 12,
		"(P+S)/2-P/2": 3, "P+S": 12, "max(B,S)": 5, "min(4,(P+S)/2)": 4, "S-5": 0, "M-S-P": 52,
	} {
		if got, err := b.Expr(s); err != nil || got != want {
			t.Errorf("Expr(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	// A size that goes negative is an error, not a wrapped or negative
	// number: "S-6" or a chain of saturated terms.
	for _, s := range []string{"", "Q", "M/0", "min(S)", "min(S", "(S", "S)", "B S", "S-6", "P-S-3", "1-M*M*M*M-M*M*M*M", "99999999999999999999"} {
		if v, err := b.Expr(s); err == nil {
			t.Errorf("Expr(%q) = %d, want an error", s, v)
		}
	}
	if v, _ := (Bindings{M: math.MaxInt64 / 2}).Expr("M*M*M"); v != math.MaxInt64 {
		t.Errorf("M*M*M = %d, want saturation", v)
	}
	if _, err := (Bindings{S: -1}).Expr("B"); err == nil {
		t.Errorf("a negative binding gives no error")
	}
	got, err := b.Dims(Dims("B", 3, "M/2"))
	if err != nil || len(got) != 3 || got[0] != 2 || got[1] != 3 || got[2] != 32 {
		t.Errorf("Dims = %v, %v", got, err)
	}
}
