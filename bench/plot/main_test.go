package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The checked-in plot is what the script draws from the checked-in rows.
func TestPlotMatchesData(t *testing.T) {
	out := filepath.Join(t.TempDir(), "longctx.svg")
	if err := run("../longctx.json", out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../longctx.svg")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatal("bench/longctx.svg is stale: go run ./bench/plot -in bench/longctx.json -o bench/longctx.svg")
	}
	// well-formed, one point a row and panel
	if err := xml.Unmarshal(got, new(struct{})); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	b, _ := os.ReadFile("../longctx.json")
	var d Data
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, s := range d.Series {
		rows += len(s.Rows)
	}
	if n := strings.Count(string(got), "<circle"); n != 2*rows {
		t.Fatalf("%d points for %d rows in two panels", n, rows)
	}
}

// Bad rows are refused with the series named, and no file is written.
func TestPlotRefusesBadRows(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "d.json"), filepath.Join(dir, "p.svg")
	os.WriteFile(in, []byte(`{"series":[{"name":"x","rows":[{"tokens":1024,"prefill_s":0,"peak_rss_gib":1}]}]}`), 0o644)
	err := run(in, out)
	if err == nil || !strings.Contains(err.Error(), `series "x"`) {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a file was written: %v", err)
	}
}
