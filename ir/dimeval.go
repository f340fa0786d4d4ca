package ir

import (
	"fmt"
	"math"
	"strconv"
)

// Bindings give the run-time symbols of shapes their values: B (batch), S
// (tokens in the call), M (maximum length) and P (start position). Planners,
// memory estimates and executors all evaluate symbolic dimensions with it.
type Bindings struct{ B, S, M, P int64 }

// Dim evaluates one dimension.
func (b Bindings) Dim(d Dim) (int64, error) {
	if d.IsConst() {
		return d.N, nil
	}
	return b.Expr(d.Sym)
}

// Dims evaluates every dimension of a shape.
func (b Bindings) Dims(s Shape) ([]int64, error) {
	out := make([]int64, len(s))
	for i, d := range s {
		v, err := b.Dim(d)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// Expr evaluates a symbolic dimension: integers, B, S, M, P, + - * /
// (integer division), parentheses, min(a,b) and max(a,b). Every value is a
// size: a difference that goes negative is an error (bindings are
// non-negative; a negative one is an error too), and sums and products
// saturate at math.MaxInt64 instead of overflowing, so a huge maximum
// length gives a huge size, not a negative one.
func (b Bindings) Expr(expr string) (int64, error) {
	if b.B < 0 || b.S < 0 || b.M < 0 || b.P < 0 {
		return 0, fmt.Errorf("dimension %q: negative binding %+v", expr, b)
	}
	p := &dimParser{s: expr, b: b}
	v, err := p.sum()
	if err == nil && p.peek() != 0 {
		err = fmt.Errorf("unexpected %q", p.s[p.i:])
	}
	if err != nil {
		return 0, fmt.Errorf("dimension %q: %v", expr, err)
	}
	return v, nil
}

// SatAdd and SatMul add and multiply non-negative sizes, saturating at
// math.MaxInt64.
func SatAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// SatMul multiplies non-negative sizes, saturating at math.MaxInt64.
func SatMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

type dimParser struct {
	s string
	i int
	b Bindings
}

func (p *dimParser) peek() byte {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *dimParser) sum() (int64, error) {
	v, err := p.product()
	for err == nil {
		c := p.peek()
		if c != '+' && c != '-' {
			break
		}
		p.i++
		var w int64
		switch w, err = p.product(); {
		case err != nil:
		case c == '+':
			v = SatAdd(v, w)
		case w > v:
			// Every value is a size: one that goes negative is an error of
			// the shape (a hand-edited plan), never a wrapped number.
			err = fmt.Errorf("goes negative (%d-%d)", v, w)
		default:
			v -= w
		}
	}
	return v, err
}

func (p *dimParser) product() (int64, error) {
	v, err := p.atom()
	for err == nil {
		c := p.peek()
		if c != '*' && c != '/' {
			break
		}
		p.i++
		var w int64
		if w, err = p.atom(); err != nil {
			break
		}
		switch {
		case c == '*':
			v = SatMul(v, w)
		case w == 0:
			err = fmt.Errorf("division by zero")
		default:
			v /= w
		}
	}
	return v, err
}

func (p *dimParser) atom() (int64, error) {
	c := p.peek()
	switch {
	case c == '(':
		p.i++
		v, err := p.sum()
		if err == nil && p.peek() != ')' {
			err = fmt.Errorf("missing )")
		}
		p.i++
		return v, err
	case c >= '0' && c <= '9':
		j := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		v, err := strconv.ParseInt(p.s[j:p.i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("number %s out of range", p.s[j:p.i])
		}
		return v, nil
	}
	j := p.i
	for p.i < len(p.s) && (p.s[p.i] == '_' || (p.s[p.i]|0x20 >= 'a' && p.s[p.i]|0x20 <= 'z')) {
		p.i++
	}
	switch id := p.s[j:p.i]; id {
	case "B":
		return p.b.B, nil
	case "S":
		return p.b.S, nil
	case "M":
		return p.b.M, nil
	case "P":
		return p.b.P, nil
	case "min", "max":
		if p.peek() != '(' {
			return 0, fmt.Errorf("%s needs arguments", id)
		}
		p.i++
		x, err := p.sum()
		if err != nil {
			return 0, err
		}
		if p.peek() != ',' {
			return 0, fmt.Errorf("%s needs two arguments", id)
		}
		p.i++
		y, err := p.sum()
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, fmt.Errorf("missing )")
		}
		p.i++
		if id == "min" {
			return min(x, y), nil
		}
		return max(x, y), nil
	case "":
		return 0, fmt.Errorf("unexpected %q", p.s[p.i:])
	default:
		return 0, fmt.Errorf("unknown symbol %q", id)
	}
}
