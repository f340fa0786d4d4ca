package tokenizer

import (
	"regexp"
	"unicode"
)

// A splitter finds the matches of a Split pre-tokenizer's pattern in s, as
// [start, end) byte offsets, leftmost first and non-overlapping.
type splitter func(s string) [][2]int

// DeepSeek's three Split patterns, exactly as its tokenizer.json spells them.
const (
	patDigits = `\p{N}{1,3}`
	patCJK    = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	patWords  = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

// newSplitter returns the matcher of a Split pattern. The words pattern needs
// a lookahead Go's regexp lacks, so it has a scanner of its own; a pattern
// Go's regexp can run with Oniguruma's meaning (no \s, whose Go meaning is
// ASCII only, no lookaround) runs there; any other is refused.
func newSplitter(pattern string, isRegex bool) (splitter, error) {
	if !isRegex {
		return literalSplitter(pattern), nil
	}
	switch pattern {
	case patWords:
		return scanAll(wordsMatch), nil
	case patDigits:
		return scanAll(digitsMatch), nil
	}
	if hasUnsupported(pattern) {
		return nil, errUnsupported
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, errUnsupported
	}
	return func(s string) [][2]int {
		var out [][2]int
		for _, m := range re.FindAllStringIndex(s, -1) {
			out = append(out, [2]int{m[0], m[1]})
		}
		return out
	}, nil
}

type unsupportedError struct{}

func (unsupportedError) Error() string { return "a Split pattern this tokenizer cannot run" }

var errUnsupported error = unsupportedError{}

func hasUnsupported(p string) bool {
	for i := 0; i+1 < len(p); i++ {
		if p[i] == '\\' {
			if c := p[i+1]; c == 's' || c == 'S' || c == 'w' || c == 'W' || c == 'd' || c == 'D' || c == 'b' || c == 'B' {
				return true
			}
			i++
			continue
		}
		if p[i] == '(' && p[i+1] == '?' && i+2 < len(p) && (p[i+2] == '=' || p[i+2] == '!' || p[i+2] == '<') {
			return true
		}
	}
	return false
}

func literalSplitter(lit string) splitter {
	return func(s string) [][2]int {
		var out [][2]int
		if lit == "" {
			return nil
		}
		for i := 0; i+len(lit) <= len(s); {
			if s[i:i+len(lit)] == lit {
				out = append(out, [2]int{i, i + len(lit)})
				i += len(lit)
			} else {
				i++
			}
		}
		return out
	}
}

// scanAll runs a matcher at each position from left to right: match returns
// the end of the match starting at i, or -1.
func scanAll(match func(rs []rune, i int) int) splitter {
	return func(s string) [][2]int {
		rs := []rune(s)
		off := make([]int, len(rs)+1) // rune index -> byte offset
		for i, b := 0, 0; i < len(rs); i++ {
			off[i] = b
			b += len(string(rs[i]))
			off[i+1] = b
		}
		var out [][2]int
		for i := 0; i < len(rs); {
			if j := match(rs, i); j > i {
				out = append(out, [2]int{off[i], off[j]})
				i = j
			} else {
				i++
			}
		}
		return out
	}
}

// digitsMatch is \p{N}{1,3}.
func digitsMatch(rs []rune, i int) int {
	j := i
	for j < len(rs) && j-i < 3 && unicode.IsNumber(rs[j]) {
		j++
	}
	return j
}

// isSpace is Oniguruma's Unicode \s: the White_Space property.
func isSpace(r rune) bool { return unicode.Is(unicode.White_Space, r) }

func isLetter(r rune) bool { return unicode.IsLetter(r) }
func isLM(r rune) bool     { return unicode.IsLetter(r) || unicode.Is(unicode.M, r) }
func isPS(r rune) bool     { return unicode.IsPunct(r) || unicode.IsSymbol(r) }
func isCRLF(r rune) bool   { return r == '\r' || r == '\n' }
func isASCIIPunct(r rune) bool {
	return r < 0x80 && r > ' ' && r != 0x7f && !('0' <= r && r <= '9') && !('A' <= r && r <= 'Z') && !('a' <= r && r <= 'z')
}
func isASCIILetter(r rune) bool { return ('A' <= r && r <= 'Z') || ('a' <= r && r <= 'z') }

// wordsMatch is DeepSeek's words pattern at position i, its alternatives
// tried in order with the backtracking a regex engine would do:
//
//	[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
//	[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//	 ?[\p{P}\p{S}]+[\r\n]*
//	\s*[\r\n]+
//	\s+(?!\S)
//	\s+
func wordsMatch(rs []rune, i int) int {
	n := len(rs)
	run := func(j int, in func(rune) bool) int {
		for j < n && in(rs[j]) {
			j++
		}
		return j
	}
	c := rs[i]
	if isASCIIPunct(c) && i+1 < n && isASCIILetter(rs[i+1]) {
		return run(i+1, isASCIILetter)
	}
	if !isCRLF(c) && !isLetter(c) && !isPS(c) && i+1 < n && isLM(rs[i+1]) {
		return run(i+1, isLM)
	}
	if isLM(c) {
		return run(i, isLM)
	}
	if c == ' ' && i+1 < n && isPS(rs[i+1]) {
		return run(run(i+1, isPS), isCRLF)
	}
	if isPS(c) {
		return run(run(i, isPS), isCRLF)
	}
	if !isSpace(c) {
		return -1
	}
	end := run(i, isSpace)
	for k := end - 1; k >= i; k-- { // \s*[\r\n]+: the last line break of the run
		if isCRLF(rs[k]) {
			return k + 1
		}
	}
	if end == n || end-1 == i { // \s+(?!\S), else \s+ of one rune
		return end
	}
	return end - 1
}

// gpt2Match is the pattern of the ByteLevel pre-tokenizer's use_regex:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func gpt2Match(rs []rune, i int) int {
	n := len(rs)
	run := func(j int, in func(rune) bool) int {
		for j < n && in(rs[j]) {
			j++
		}
		return j
	}
	if rs[i] == '\'' {
		for _, c := range []string{"s", "t", "re", "ve", "m", "ll", "d"} {
			if i+1+len(c) <= n && string(rs[i+1:i+1+len(c)]) == c {
				return i + 1 + len(c)
			}
		}
	}
	other := func(r rune) bool { return !isSpace(r) && !isLetter(r) && !unicode.IsNumber(r) }
	j := i
	if rs[j] == ' ' && j+1 < n {
		j++
	}
	for _, in := range []func(rune) bool{isLetter, unicode.IsNumber, other} {
		if in(rs[j]) {
			return run(j, in)
		}
	}
	if !isSpace(rs[i]) {
		return -1
	}
	end := run(i, isSpace)
	if end == n || end-1 == i {
		return end
	}
	return end - 1
}
