package ir

import "testing"

// FuzzParse checks that Parse never panics and that whatever it accepts
// formats to text that parses again and formats identically.
func FuzzParse(f *testing.F) {
	f.Add(goodGraph)
	f.Add(Format(attrModule()))
	f.Add("graph g {\n  %0 = input {name=\"x\"} : f32[B,min(S,128)]\n  %1 = relu(%0) : f32[B,min(S,128)]\n  output y = %1\n}\n")
	f.Add("module {\n}\n")
	m := &Module{Meta: map[string]string{}}
	for i, c := range opCases() {
		if i%7 == 0 {
			m.Graphs = append(m.Graphs, caseGraph(f, c.op, c))
		}
	}
	f.Add(Format(m))
	f.Fuzz(func(t *testing.T, text string) {
		m, err := Parse(text)
		if err != nil {
			return
		}
		once := Format(m)
		m2, err := Parse(once)
		if err != nil {
			t.Fatalf("formatted text does not parse: %v\n%s", err, once)
		}
		if twice := Format(m2); twice != once {
			t.Fatalf("format is not stable:\n%s", firstDiff(once, twice))
		}
		if err := VerifyModule(m2); err != nil {
			t.Fatalf("parsed module does not verify: %v\n%s", err, once)
		}
	})
}
