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
// well-formed UTF-8 sequence (at least 1), b starting an ill-formed one:
// utf8.FullRune is false exactly for a proper prefix of a well-formed one.
func maximalSubpart(b []byte) int {
	n := 1
	for n < len(b) && n < utf8.UTFMax && !utf8.FullRune(b[:n+1]) {
		n++
	}
	return n
}

// incompleteTail is the length of a suffix of b that is a proper prefix of a
// well-formed UTF-8 sequence (0 if none): bytes a stream must hold back.
func incompleteTail(b []byte) int {
	for k := 1; k < utf8.UTFMax && k <= len(b); k++ {
		if tail := b[len(b)-k:]; utf8.RuneStart(tail[0]) {
			if utf8.FullRune(tail) {
				return 0
			}
			return k
		}
	}
	return 0
}
