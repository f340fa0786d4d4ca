package ir

import (
	"fmt"
	"strconv"
	"strings"
)

// Dim is one dimension of a shape: a constant size, or a symbol bound at run
// time. Symbols are B (batch), S (tokens in this call), M (maximum sequence
// length of the caches) and P (the start position); a symbol may also be a
// small expression over them such as "(P+S)/2" or "min(S,128)", which names a
// size the kernels compute at run time. Two symbolic dims are equal when their
// text is equal.
type Dim struct {
	Sym string // empty for a constant
	N   int64  // the constant size when Sym is empty
}

// C returns a constant dimension.
func C(n int64) Dim { return Dim{N: n} }

// Sym returns a symbolic dimension.
func Sym(s string) Dim { return Dim{Sym: s} }

// IsConst reports whether the dimension is a known constant.
func (d Dim) IsConst() bool { return d.Sym == "" }

func (d Dim) String() string {
	if d.Sym != "" {
		return d.Sym
	}
	return strconv.FormatInt(d.N, 10)
}

// Shape is an ordered list of dimensions; a scalar has none.
type Shape []Dim

// Dims builds a shape from ints (constants) and strings (symbols).
func Dims(ds ...any) Shape {
	s := make(Shape, len(ds))
	for i, d := range ds {
		switch v := d.(type) {
		case int:
			s[i] = C(int64(v))
		case int64:
			s[i] = C(v)
		case string:
			s[i] = Sym(v)
		case Dim:
			s[i] = v
		default:
			panic(fmt.Sprintf("ir.Dims: unsupported %T", d))
		}
	}
	return s
}

// Rank is the number of dimensions.
func (s Shape) Rank() int { return len(s) }

// Equal reports whether two shapes are the same dimension by dimension.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// NumElements returns the element count when every dimension is constant,
// saturating at math.MaxInt64.
func (s Shape) NumElements() (int64, bool) {
	n := int64(1)
	for _, d := range s {
		if !d.IsConst() {
			return 0, false
		}
		n = SatMul(n, d.N) // a huge shape gives a huge count, never a wrapped one
	}
	return n, true
}

// Last returns the last dimension (a zero Dim for scalars).
func (s Shape) Last() Dim {
	if len(s) == 0 {
		return Dim{}
	}
	return s[len(s)-1]
}

// Clone returns a copy that can be modified freely.
func (s Shape) Clone() Shape { return append(Shape(nil), s...) }

func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// Type is the static type of a value: element type and shape.
type Type struct {
	DType DType
	Shape Shape
}

// T builds a type.
func T(d DType, dims ...any) Type { return Type{DType: d, Shape: Dims(dims...)} }

func (t Type) String() string { return t.DType.String() + t.Shape.String() }

// Equal reports whether two types are identical.
func (t Type) Equal(o Type) bool { return t.DType == o.DType && t.Shape.Equal(o.Shape) }

// ParseType parses the text form "bf16[B,S,128]".
func ParseType(s string) (Type, error) {
	i := strings.IndexByte(s, '[')
	if i < 0 || !strings.HasSuffix(s, "]") {
		return Type{}, fmt.Errorf("bad type %q: want dtype[dims]", s)
	}
	dt, err := ParseDType(s[:i])
	if err != nil {
		return Type{}, err
	}
	sh, err := ParseShape(s[i:])
	if err != nil {
		return Type{}, err
	}
	return Type{DType: dt, Shape: sh}, nil
}

// ParseShape parses "[B,S,128]" (brackets included). Commas inside
// parentheses belong to the dimension, as in "min(S,128)".
func ParseShape(s string) (Shape, error) {
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return nil, fmt.Errorf("bad shape %q", s)
	}
	body := s[1 : len(s)-1]
	if strings.TrimSpace(body) == "" {
		return Shape{}, nil
	}
	var out Shape
	depth, start := 0, 0
	for i := 0; i <= len(body); i++ {
		if i < len(body) {
			switch body[i] {
			case '(':
				depth++
				continue
			case ')':
				depth--
				if depth < 0 {
					return nil, fmt.Errorf("bad shape %q: unbalanced parentheses", s)
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		tok := strings.TrimSpace(body[start:i])
		start = i + 1
		d, err := parseDim(tok)
		if err != nil {
			return nil, fmt.Errorf("bad shape %q: %v", s, err)
		}
		out = append(out, d)
	}
	if depth != 0 {
		return nil, fmt.Errorf("bad shape %q: unbalanced parentheses", s)
	}
	return out, nil
}

func parseDim(tok string) (Dim, error) {
	if tok == "" {
		return Dim{}, fmt.Errorf("empty dimension")
	}
	if tok[0] >= '0' && tok[0] <= '9' {
		n, err := strconv.ParseInt(tok, 10, 64)
		if err != nil || n < 0 {
			return Dim{}, fmt.Errorf("bad dimension %q", tok)
		}
		return C(n), nil
	}
	for _, r := range tok {
		if !(r == '_' || r == '(' || r == ')' || r == '+' || r == '-' || r == '*' || r == '/' || r == ',' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')) {
			return Dim{}, fmt.Errorf("bad symbolic dimension %q", tok)
		}
	}
	return Sym(tok), nil
}
