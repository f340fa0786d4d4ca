// Command plot draws bench/longctx.svg, prefill time and peak resident
// memory against prompt length, from the measured rows in
// bench/longctx.json (each series one run of `exec -bench -bench-long`,
// with where its figures come from):
//
//	go run ./bench/plot -in bench/longctx.json -o bench/longctx.svg
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// Data is longctx.json.
type Data struct {
	Title  string   `json:"title"`
	Bound  *Bound   `json:"bound,omitempty"`
	Series []Series `json:"series"`
}

// Bound is a memory bound drawn as a dashed line on the memory panel.
type Bound struct {
	Label string  `json:"label"`
	GiB   float64 `json:"gib"`
}

// Series is one run's rows.
type Series struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Rows   []Row  `json:"rows"`
}

// Row is one prompt length's figures.
type Row struct {
	Tokens   int     `json:"tokens"`
	PrefillS float64 `json:"prefill_s"`
	PeakGiB  float64 `json:"peak_rss_gib"`
}

func main() {
	in := flag.String("in", "bench/longctx.json", "the measured rows")
	out := flag.String("o", "bench/longctx.svg", "the SVG to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var d Data
	if err := json.Unmarshal(b, &d); err != nil {
		return fmt.Errorf("%s: %v", in, err)
	}
	if err := d.check(); err != nil {
		return fmt.Errorf("%s: %v", in, err)
	}
	var sb strings.Builder
	d.svg(&sb)
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, []byte(sb.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out) // never a half-written file
}

func (d *Data) check() error {
	if len(d.Series) == 0 {
		return fmt.Errorf("no series")
	}
	for _, s := range d.Series {
		if len(s.Rows) == 0 {
			return fmt.Errorf("series %q has no rows", s.Name)
		}
		for _, r := range s.Rows {
			if r.Tokens <= 0 || r.PrefillS <= 0 || r.PeakGiB <= 0 {
				return fmt.Errorf("series %q: row %+v needs tokens, prefill_s and peak_rss_gib above 0", s.Name, r)
			}
		}
	}
	return nil
}

// panel geometry (pixels)
const (
	width, height = 900, 420
	left, top     = 70, 50
	panelW        = 340
	panelH        = 250
	gap           = 110
)

var colors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}

// svg writes both panels: x is log2 of the prompt length, prefill seconds
// on a log scale, peak RSS on a linear one.
func (d *Data) svg(w io.Writer) {
	minT, maxT := math.Inf(1), math.Inf(-1)
	maxS, minS, maxG := 0.0, math.Inf(1), 0.0
	for _, s := range d.Series {
		for _, r := range s.Rows {
			minT, maxT = math.Min(minT, float64(r.Tokens)), math.Max(maxT, float64(r.Tokens))
			maxS, minS, maxG = math.Max(maxS, r.PrefillS), math.Min(minS, r.PrefillS), math.Max(maxG, r.PeakGiB)
		}
	}
	if d.Bound != nil {
		maxG = math.Max(maxG, d.Bound.GiB)
	}
	lx0, lx1 := math.Floor(math.Log2(minT)), math.Ceil(math.Log2(maxT))
	if lx1 == lx0 {
		lx1++
	}
	ly0, ly1 := math.Floor(math.Log10(minS)), math.Ceil(math.Log10(maxS))
	if ly1 == ly0 {
		ly1++
	}
	gTop := math.Ceil(maxG * 1.15)
	x := func(p int, t float64) float64 {
		return float64(left+p*(panelW+gap)) + (math.Log2(t)-lx0)/(lx1-lx0)*panelW
	}
	yS := func(s float64) float64 { return top + panelH - (math.Log10(s)-ly0)/(ly1-ly0)*panelH }
	yG := func(g float64) float64 { return top + panelH - g/gTop*panelH }

	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(w, `<text x="%d" y="22" font-size="14">%s</text>`+"\n", left, esc(d.Title))
	for p, name := range []string{"prefill (s, log scale)", "peak resident memory (GiB)"} {
		x0 := float64(left + p*(panelW+gap))
		fmt.Fprintf(w, `<rect x="%.0f" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>`+"\n", x0, top, panelW, panelH)
		fmt.Fprintf(w, `<text x="%.0f" y="%d">%s</text>`+"\n", x0, top-6, name)
		for e := lx0; e <= lx1; e++ {
			t := math.Exp2(e)
			fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(p, t), top+panelH+16, tokens(t))
		}
		fmt.Fprintf(w, `<text x="%.0f" y="%d" text-anchor="middle">prompt tokens</text>`+"\n", x0+panelW/2, top+panelH+34)
	}
	for e := ly0; e <= ly1; e++ {
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", left-6, yS(math.Pow(10, e))+4, math.Pow(10, e))
	}
	x1 := float64(left + panelW + gap)
	for g := 0.0; g <= gTop; g += math.Max(1, math.Round(gTop/6)) {
		fmt.Fprintf(w, `<text x="%.0f" y="%.1f" text-anchor="end">%g</text>`+"\n", x1-6, yG(g)+4, g)
	}
	if d.Bound != nil {
		y := yG(d.Bound.GiB)
		fmt.Fprintf(w, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#888" stroke-dasharray="5,4"/>`+"\n", x1, y, x1+panelW, y)
		fmt.Fprintf(w, `<text x="%.0f" y="%.1f" fill="#555">%s</text>`+"\n", x1+4, y-4, esc(d.Bound.Label))
	}
	for i, s := range d.Series {
		c := colors[i%len(colors)]
		for p := range 2 {
			var pts []string
			for _, r := range s.Rows {
				y := yS(r.PrefillS)
				if p == 1 {
					y = yG(r.PeakGiB)
				}
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p, float64(r.Tokens)), y))
				fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", x(p, float64(r.Tokens)), y, c)
			}
			fmt.Fprintf(w, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", strings.Join(pts, " "), c)
		}
		fmt.Fprintf(w, `<text x="%d" y="%d" fill="%s">● %s</text>`+"\n", left, top+panelH+56+16*i, c, esc(s.Name))
	}
	fmt.Fprintln(w, "</svg>")
}

func tokens(t float64) string {
	if t >= 1024 {
		return fmt.Sprintf("%gK", t/1024)
	}
	return fmt.Sprintf("%g", t)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
