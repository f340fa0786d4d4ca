package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// segment is a piece of text, or an added token (id >= 0).
type segment struct {
	text string
	id   int64
}

// splitAdded cuts text at the added tokens whose normalized flag is
// normalized, leftmost first and the longest there, as Hugging Face's
// AddedVocabulary does; lstrip and rstrip let a token take the whitespace
// beside it, and a single_word token matches only as a whole word.
func (t *Tokenizer) splitAdded(text string, normalized bool) []segment {
	var out []segment
	start := 0 // start of the text not yet emitted
	for i := 0; i < len(text); {
		a, ok := t.addedAt(text, i, normalized)
		if !ok {
			i++
			continue
		}
		lo, hi := i, i+len(a.content)
		if a.lstrip {
			for lo > start {
				r, n := utf8.DecodeLastRuneInString(text[start:lo])
				if !unicode.IsSpace(r) {
					break
				}
				lo -= n
			}
		}
		if a.rstrip {
			hi += len(text[hi:]) - len(strings.TrimLeftFunc(text[hi:], unicode.IsSpace))
		}
		if lo > start {
			out = append(out, segment{text: text[start:lo], id: -1})
		}
		out = append(out, segment{id: a.id})
		start, i = hi, hi
	}
	if start < len(text) || len(out) == 0 {
		out = append(out, segment{text: text[start:], id: -1})
	}
	return out
}

// addedAt returns the longest added token matching text at i.
func (t *Tokenizer) addedAt(text string, i int, normalized bool) (addedToken, bool) {
	best, found := addedToken{}, false
	node := t.addedTrie[boolIndex(normalized)]
	for j := i; j < len(text) && node != nil; j++ {
		node = node.next[text[j]]
		if node == nil || node.token < 0 {
			continue
		}
		if a := t.added[node.token]; !a.singleWord || wholeWord(text, i, j+1) {
			best, found = a, true
		}
	}
	return best, found
}

// trie is a byte trie of the added tokens' contents.
type trie struct {
	next  map[byte]*trie
	token int // index into added, or -1
}

func (n *trie) insert(s string, token int) {
	for i := 0; i < len(s); i++ {
		c, ok := n.next[s[i]]
		if !ok {
			c = &trie{next: map[byte]*trie{}, token: -1}
			n.next[s[i]] = c
		}
		n = c
	}
	n.token = token
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

func wholeWord(text string, lo, hi int) bool {
	isWord := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_' }
	if lo > 0 {
		if r, _ := utf8.DecodeLastRuneInString(text[:lo]); isWord(r) {
			return false
		}
	}
	if hi < len(text) {
		if r, _ := utf8.DecodeRuneInString(text[hi:]); isWord(r) {
			return false
		}
	}
	return true
}
