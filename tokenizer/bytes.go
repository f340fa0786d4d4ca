package tokenizer

import "unicode/utf8"

// byteChar maps each byte to the printable rune GPT-2's byte-level BPE
// stands it for; charByte is its inverse.
var byteChar [256]rune
var charByte = map[rune]byte{}

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if printable {
			byteChar[b] = rune(b)
		} else {
			byteChar[b] = rune(256 + n)
			n++
		}
		charByte[byteChar[b]] = byte(b)
	}
}

// byteLevel returns s in byte-level form: each byte as its rune.
func byteLevel(s string) string {
	out := make([]rune, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = byteChar[s[i]]
	}
	return string(out)
}

// tokenBytes returns the bytes a token decodes to, as Hugging Face's
// ByteLevel decoder does: a token made only of byte-level runes gives their
// bytes; any other token (an added token such as "<｜User｜>") its own text.
func tokenBytes(dst []byte, tok string) []byte {
	start := len(dst)
	for _, r := range tok {
		b, ok := charByte[r]
		if !ok {
			return append(dst[:start], tok...)
		}
		dst = append(dst, b)
	}
	return dst
}

// appendLossy appends b to dst as valid UTF-8, replacing each maximal
// ill-formed subpart by U+FFFD (Unicode's recommended practice, which both
// Rust's from_utf8_lossy and the WHATWG decoder follow).
func appendLossy(dst []byte, b []byte) []byte {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r != utf8.RuneError || n > 1 {
			dst = append(dst, b[:n]...)
			b = b[n:]
			continue
		}
		dst = append(dst, "\uFFFD"...)
		b = b[maximalSubpart(b):]
	}
	return dst
}

// maximalSubpart is the length of the longest prefix of b that starts a
// well-formed UTF-8 sequence (at least 1), b starting an ill-formed one.
func maximalSubpart(b []byte) int {
	lo, hi, need := byte(0x80), byte(0xBF), 0
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		lo, need = 0xA0, 2
	case c == 0xED:
		hi, need = 0x9F, 2
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		lo, need = 0x90, 3
	case c == 0xF4:
		hi, need = 0x8F, 3
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}

// incompleteTail is the length of a suffix of b that is a proper prefix of a
// well-formed UTF-8 sequence (0 if none): bytes a stream must hold back.
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		tail := b[len(b)-k:]
		if tail[0] < 0xC0 {
			continue // a continuation byte: look further back
		}
		if maximalSubpart(tail) == k && k < seqLen(tail[0]) {
			return k
		}
		return 0
	}
	return 0
}

func seqLen(c byte) int {
	switch {
	case c >= 0xF0:
		return 4
	case c >= 0xE0:
		return 3
	case c >= 0xC0:
		return 2
	}
	return 1
}
