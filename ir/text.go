package ir

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// ---- printing --------------------------------------------------------------

// Format prints a module in the text form that Parse reads: a module block
// holding the metadata (keys sorted), then every graph in order. The text is
// deterministic and Parse(Format(m)) formats to the same string.
func Format(m *Module) string {
	var b strings.Builder
	b.WriteString("module {\n")
	if m != nil {
		keys := make([]string, 0, len(m.Meta))
		for k := range m.Meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  meta %s = %s\n", strconv.Quote(k), strconv.Quote(m.Meta[k]))
		}
	}
	b.WriteString("}\n")
	if m != nil {
		for _, g := range m.Graphs {
			b.WriteString(FormatGraph(g))
		}
	}
	return b.String()
}

// FormatGraph prints one graph: a line per node in order, then a line per
// output.
func FormatGraph(g *Graph) string {
	if g == nil {
		return "graph \"<nil>\" {\n}\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "graph %s {\n", formatName(g.Name))
	for _, n := range g.Nodes {
		b.WriteString("  ")
		b.WriteString(FormatNode(n))
		b.WriteByte('\n')
	}
	for _, o := range g.Outputs {
		fmt.Fprintf(&b, "  output %s = %s\n", formatName(o.Name), formatRef(o.Node))
	}
	b.WriteString("}\n")
	return b.String()
}

// FormatNode prints one node as "%ID = op(%a, %b) {k=v, ...} : type".
func FormatNode(n *Node) string {
	if n == nil {
		return "<nil node>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%%%d = %s", n.ID, formatName(n.Op))
	if len(n.Args) > 0 {
		b.WriteByte('(')
		for i, a := range n.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(formatRef(a))
		}
		b.WriteByte(')')
	}
	if len(n.Attrs) > 0 {
		b.WriteString(" {")
		for i, k := range n.Attrs.Keys() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(formatName(k))
			b.WriteByte('=')
			b.WriteString(FormatAttr(n.Attrs[k]))
		}
		b.WriteByte('}')
	}
	b.WriteString(" : ")
	b.WriteString(n.Type.String())
	return b.String()
}

func formatRef(n *Node) string {
	if n == nil {
		return "%<nil>"
	}
	return "%" + strconv.Itoa(n.ID)
}

// formatName prints a name bare when it is an identifier, quoted otherwise.
func formatName(s string) string {
	if isIdent(s) {
		return s
	}
	return strconv.Quote(s)
}

func isIdentStart(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isIdentChar(c byte) bool  { return isIdentStart(c) || c == '.' || (c >= '0' && c <= '9') }

func isIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}

// FormatAttr prints an attribute value: int64 in decimal, float64 always with
// a '.' or an exponent (or inf, -inf, nan), a quoted string, true/false,
// [1,2] / [1.0,2.5] lists, and ints[] / floats[] for empty lists. Values of
// other Go types print as <T v>, which Parse rejects.
func FormatAttr(v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return formatFloat(x)
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case []int64:
		if len(x) == 0 {
			return "ints[]"
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = strconv.FormatInt(e, 10)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case []float64:
		if len(x) == 0 {
			return "floats[]"
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = formatFloat(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprintf("<%T %v>", v, v)
}

func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// ---- parsing ---------------------------------------------------------------

// maxNodeID bounds node IDs in text so that ID arithmetic cannot overflow.
const maxNodeID = 1 << 30

// Parse reads the text form written by Format. Blank lines and lines starting
// with '#' or "//" are ignored. Every node is checked as it is read: its op
// must be known, its arguments defined earlier in the same graph, its arity
// and attributes must match the op table, and the printed type must equal the
// type the op's rule infers (for source ops, the rule must accept the declared
// type). State updates must thread state linearly and output names must be
// unique. Errors name the line: `line 12: unknown op "matmull"`.
func Parse(text string) (*Module, error) {
	p := &parser{m: &Module{Meta: map[string]string{}}}
	lines := strings.Split(text, "\n")
	for i, raw := range lines {
		p.line = i + 1
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || strings.HasPrefix(line, "//") {
			continue
		}
		if err := p.parseLine(line); err != nil {
			return nil, fmt.Errorf("line %d: %v", p.line, err)
		}
	}
	switch p.state {
	case inModule:
		return nil, fmt.Errorf("line %d: unterminated module block", p.line)
	case inGraph:
		return nil, fmt.Errorf("line %d: unterminated graph %s", p.line, formatName(p.g.Name))
	}
	return p.m, nil
}

type parseState int

const (
	topLevel parseState = iota
	inModule
	inGraph
)

type parser struct {
	m       *Module
	line    int
	state   parseState
	sawMod  bool
	g       *Graph
	ids     map[int]*Node
	states  stateThreads
	outputs map[string]bool
}

func (p *parser) parseLine(line string) error {
	sc := &scanner{s: line}
	switch p.state {
	case topLevel:
		kw := sc.ident()
		switch kw {
		case "module":
			if p.sawMod {
				return fmt.Errorf("second module block")
			}
			if err := sc.expectEnd("{"); err != nil {
				return err
			}
			p.sawMod = true
			p.state = inModule
			return nil
		case "graph":
			name, err := sc.name()
			if err != nil {
				return fmt.Errorf("graph name: %v", err)
			}
			if err := sc.expectEnd("{"); err != nil {
				return err
			}
			if p.m.Graph(name) != nil {
				return fmt.Errorf("duplicate graph %s", formatName(name))
			}
			p.g = NewGraph(name)
			p.ids = map[int]*Node{}
			p.states = stateThreads{}
			p.outputs = map[string]bool{}
			p.state = inGraph
			return nil
		}
		return fmt.Errorf("want `module {` or `graph NAME {`, got %q", clip(line))
	case inModule:
		if line == "}" {
			p.state = topLevel
			return nil
		}
		if sc.ident() != "meta" {
			return fmt.Errorf("want `meta \"key\" = \"value\"` or `}`, got %q", clip(line))
		}
		k, err := sc.name()
		if err != nil {
			return fmt.Errorf("meta key: %v", err)
		}
		if !sc.eat('=') {
			return fmt.Errorf("meta %s: want '='", formatName(k))
		}
		sc.skipSpace()
		v, err := sc.quoted()
		if err != nil {
			return fmt.Errorf("meta %s: %v", formatName(k), err)
		}
		if err := sc.expectEnd(""); err != nil {
			return err
		}
		if _, dup := p.m.Meta[k]; dup {
			return fmt.Errorf("duplicate meta key %q", k)
		}
		p.m.Meta[k] = v
		return nil
	}
	// Inside a graph.
	if line == "}" {
		p.m.Graphs = append(p.m.Graphs, p.g)
		p.g, p.ids, p.outputs = nil, nil, nil
		p.state = topLevel
		return nil
	}
	sc.skipSpace()
	if sc.peek() == '%' {
		return p.parseNode(sc)
	}
	if sc.ident() == "output" {
		return p.parseOutput(sc)
	}
	return fmt.Errorf("want a node `%%N = op ...`, `output NAME = %%N` or `}`, got %q", clip(line))
}

func (p *parser) parseOutput(sc *scanner) error {
	name, err := sc.name()
	if err != nil {
		return fmt.Errorf("output name: %v", err)
	}
	if !sc.eat('=') {
		return fmt.Errorf("output %s: want '='", formatName(name))
	}
	n, err := p.ref(sc)
	if err != nil {
		return fmt.Errorf("output %s: %v", formatName(name), err)
	}
	if err := sc.expectEnd(""); err != nil {
		return err
	}
	if p.outputs[name] {
		return fmt.Errorf("duplicate output %s", formatName(name))
	}
	p.outputs[name] = true
	p.g.SetOutput(name, n)
	return nil
}

// ref reads "%N" and resolves it to a node defined earlier in the graph.
func (p *parser) ref(sc *scanner) (*Node, error) {
	id, err := sc.nodeID()
	if err != nil {
		return nil, err
	}
	n := p.ids[id]
	if n == nil {
		return nil, fmt.Errorf("%%%d is not defined", id)
	}
	return n, nil
}

func (p *parser) parseNode(sc *scanner) error {
	id, err := sc.nodeID()
	if err != nil {
		return err
	}
	if p.ids[id] != nil {
		return fmt.Errorf("%%%d is defined twice", id)
	}
	if !sc.eat('=') {
		return fmt.Errorf("%%%d: want '=' after the node id", id)
	}
	sc.skipSpace()
	op := sc.ident()
	if op == "" {
		return fmt.Errorf("%%%d: want an op name", id)
	}
	info := Ops[op]
	if info == nil {
		return fmt.Errorf("unknown op %q", op)
	}
	n := &Node{ID: id, Op: op, Attrs: Attrs{}}
	if sc.eat('(') {
		if !sc.eat(')') {
			for {
				a, err := p.ref(sc)
				if err != nil {
					return fmt.Errorf("%%%d %s: argument %d: %v", id, op, len(n.Args), err)
				}
				n.Args = append(n.Args, a)
				if sc.eat(')') {
					break
				}
				if !sc.eat(',') {
					return fmt.Errorf("%%%d %s: want ',' or ')' after argument %d", id, op, len(n.Args)-1)
				}
			}
		}
	}
	if sc.eat('{') {
		if !sc.eat('}') {
			for {
				k, err := sc.name()
				if err != nil {
					return fmt.Errorf("%%%d %s: attribute name: %v", id, op, err)
				}
				if !sc.eat('=') {
					return fmt.Errorf("%%%d %s: attribute %s: want '='", id, op, formatName(k))
				}
				if _, dup := n.Attrs[k]; dup {
					return fmt.Errorf("%%%d %s: attribute %s given twice", id, op, formatName(k))
				}
				v, err := sc.value()
				if err != nil {
					return fmt.Errorf("%%%d %s: attribute %s: %v", id, op, formatName(k), err)
				}
				n.Attrs[k] = v
				if sc.eat('}') {
					break
				}
				if !sc.eat(',') {
					return fmt.Errorf("%%%d %s: want ',' or '}' after attribute %s", id, op, formatName(k))
				}
			}
		}
	}
	if !sc.eat(':') {
		return fmt.Errorf("%%%d %s: want ': type' after the op", id, op)
	}
	t, err := ParseType(strings.TrimSpace(sc.rest()))
	if err != nil {
		return fmt.Errorf("%%%d %s: %v", id, op, err)
	}
	n.Type = t
	if err := checkNode(n, "printed type"); err != nil {
		return fmt.Errorf("%%%d %s: %v", id, op, err)
	}
	if err := p.states.add(n); err != nil {
		return fmt.Errorf("%%%d %s: %v", id, op, err)
	}
	p.ids[id] = n
	p.g.Nodes = append(p.g.Nodes, n)
	if id >= p.g.nextID {
		p.g.nextID = id + 1
	}
	return nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// ---- scanner ---------------------------------------------------------------

// scanner reads the tokens of one line.
type scanner struct {
	s   string
	pos int
}

func (sc *scanner) skipSpace() {
	for sc.pos < len(sc.s) && (sc.s[sc.pos] == ' ' || sc.s[sc.pos] == '\t') {
		sc.pos++
	}
}

func (sc *scanner) peek() byte {
	if sc.pos < len(sc.s) {
		return sc.s[sc.pos]
	}
	return 0
}

// eat skips spaces and consumes c when it comes next.
func (sc *scanner) eat(c byte) bool {
	sc.skipSpace()
	if sc.peek() == c {
		sc.pos++
		return true
	}
	return false
}

func (sc *scanner) rest() string {
	r := sc.s[sc.pos:]
	sc.pos = len(sc.s)
	return r
}

// expectEnd consumes tok (after spaces) and requires the end of the line.
func (sc *scanner) expectEnd(tok string) error {
	sc.skipSpace()
	if !strings.HasPrefix(sc.s[sc.pos:], tok) {
		return fmt.Errorf("want %q", tok)
	}
	sc.pos += len(tok)
	sc.skipSpace()
	if sc.pos != len(sc.s) {
		return fmt.Errorf("unexpected %q at the end of the line", clip(sc.s[sc.pos:]))
	}
	return nil
}

// ident reads an identifier [A-Za-z_][A-Za-z0-9_.]* (empty if none).
func (sc *scanner) ident() string {
	sc.skipSpace()
	start := sc.pos
	if sc.pos < len(sc.s) && isIdentStart(sc.s[sc.pos]) {
		sc.pos++
		for sc.pos < len(sc.s) && isIdentChar(sc.s[sc.pos]) {
			sc.pos++
		}
	}
	return sc.s[start:sc.pos]
}

// name reads an identifier or a quoted string.
func (sc *scanner) name() (string, error) {
	sc.skipSpace()
	if sc.peek() == '"' {
		return sc.quoted()
	}
	if id := sc.ident(); id != "" {
		return id, nil
	}
	return "", fmt.Errorf("want a name or a quoted string")
}

// quoted reads a Go double-quoted string.
func (sc *scanner) quoted() (string, error) {
	if sc.peek() != '"' {
		return "", fmt.Errorf("want a quoted string")
	}
	i := sc.pos + 1
	for ; i < len(sc.s); i++ {
		if sc.s[i] == '\\' {
			i++
			continue
		}
		if sc.s[i] == '"' {
			break
		}
	}
	if i >= len(sc.s) {
		return "", fmt.Errorf("unterminated string")
	}
	v, err := strconv.Unquote(sc.s[sc.pos : i+1])
	if err != nil {
		return "", fmt.Errorf("bad string %s", clip(sc.s[sc.pos:i+1]))
	}
	sc.pos = i + 1
	return v, nil
}

// nodeID reads "%N".
func (sc *scanner) nodeID() (int, error) {
	if !sc.eat('%') {
		return 0, fmt.Errorf("want a node id %%N")
	}
	start := sc.pos
	for sc.pos < len(sc.s) && sc.s[sc.pos] >= '0' && sc.s[sc.pos] <= '9' {
		sc.pos++
	}
	digits := sc.s[start:sc.pos]
	if digits == "" {
		return 0, fmt.Errorf("want a node id %%N")
	}
	id, err := strconv.Atoi(digits)
	if err != nil || id >= maxNodeID {
		return 0, fmt.Errorf("node id %%%s out of range", clip(digits))
	}
	return id, nil
}

func isWordChar(c byte) bool {
	return isIdentChar(c) || c == '+' || c == '-'
}

// word reads a run of letters, digits and "_.+-": a number or a keyword.
func (sc *scanner) word() string {
	sc.skipSpace()
	start := sc.pos
	for sc.pos < len(sc.s) && isWordChar(sc.s[sc.pos]) {
		sc.pos++
	}
	return sc.s[start:sc.pos]
}

// value reads an attribute value.
func (sc *scanner) value() (any, error) {
	sc.skipSpace()
	switch sc.peek() {
	case '"':
		return sc.quoted()
	case '[':
		return sc.list("")
	}
	w := sc.word()
	switch w {
	case "":
		return nil, fmt.Errorf("want a value")
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "ints", "floats":
		if sc.peek() == '[' {
			return sc.list(w)
		}
	}
	return parseNumber(w)
}

// list reads "[e,e,...]"; kind is "ints", "floats" or "" (from the elements).
func (sc *scanner) list(kind string) (any, error) {
	sc.eat('[')
	var words []string
	if !sc.eat(']') {
		for {
			w := sc.word()
			if w == "" {
				return nil, fmt.Errorf("want a number in the list")
			}
			words = append(words, w)
			if sc.eat(']') {
				break
			}
			if !sc.eat(',') {
				return nil, fmt.Errorf("want ',' or ']' in the list")
			}
		}
	}
	if kind == "" {
		if len(words) == 0 {
			return nil, fmt.Errorf("empty list: write ints[] or floats[]")
		}
		ints := 0
		for _, w := range words {
			if isIntWord(w) {
				ints++
			}
		}
		switch ints {
		case len(words):
			kind = "ints"
		case 0:
			kind = "floats"
		default:
			return nil, fmt.Errorf("list mixes integers and floats")
		}
	}
	if kind == "ints" {
		out := make([]int64, len(words))
		for i, w := range words {
			if !isIntWord(w) {
				return nil, fmt.Errorf("ints list element %q is not an integer", clip(w))
			}
			v, err := strconv.ParseInt(w, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("integer %s out of range", clip(w))
			}
			out[i] = v
		}
		return out, nil
	}
	out := make([]float64, len(words))
	for i, w := range words {
		v, err := parseFloatWord(w)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func isIntWord(w string) bool {
	if w != "" && (w[0] == '-' || w[0] == '+') {
		w = w[1:]
	}
	if w == "" {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < '0' || w[i] > '9' {
			return false
		}
	}
	return true
}

// parseNumber classifies a word as an int64 (decimal digits) or a float64
// (decimal with '.' or exponent, or inf, -inf, nan).
func parseNumber(w string) (any, error) {
	if isIntWord(w) {
		v, err := strconv.ParseInt(w, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("integer %s out of range", clip(w))
		}
		return v, nil
	}
	return parseFloatWord(w)
}

// parseFloatWord reads a decimal float (integers included), inf, -inf or nan.
func parseFloatWord(w string) (float64, error) {
	switch w {
	case "inf", "+inf":
		return math.Inf(1), nil
	case "-inf":
		return math.Inf(-1), nil
	case "nan":
		return math.NaN(), nil
	}
	if w == "" {
		return 0, fmt.Errorf("want a number")
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return 0, fmt.Errorf("bad value %q", clip(w))
		}
	}
	v, err := strconv.ParseFloat(w, 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %q", clip(w))
	}
	return v, nil
}
