package tokenizer

import "strings"

// StreamDecoder turns ids into text as they come.
type StreamDecoder struct {
	t       *Tokenizer
	stops   []string
	raw     []byte // bytes of an incomplete UTF-8 sequence
	pending string // decoded text held back: it may begin a stop string
	stopped bool
}

// NewStreamDecoder returns a decoder that stops at any of stops (empty
// strings are ignored).
func (t *Tokenizer) NewStreamDecoder(stops []string) *StreamDecoder {
	d := &StreamDecoder{t: t}
	for _, s := range stops {
		if s != "" {
			d.stops = append(d.stops, s)
		}
	}
	return d
}

// Add decodes one more id. It emits only complete UTF-8 and holds back text
// that could begin a stop string; stopped is true once a stop string is
// complete (text excludes it, and later calls return nothing).
func (d *StreamDecoder) Add(id int64) (text string, stopped bool) {
	if d.stopped {
		return "", true
	}
	d.raw = d.t.appendBytes(d.raw, id)
	keep := incompleteTail(d.raw)
	done := len(d.raw) - keep
	d.pending += string(appendLossy(nil, d.raw[:done]))
	d.raw = append(d.raw[:0], d.raw[done:]...)
	if at := d.firstStop(); at >= 0 {
		text, d.pending, d.raw, d.stopped = d.pending[:at], "", nil, true
		return text, true
	}
	hold := d.stopPrefix()
	text = d.pending[:len(d.pending)-hold]
	d.pending = d.pending[len(d.pending)-hold:]
	return text, false
}

// Flush returns the text held back (an incomplete UTF-8 sequence as U+FFFD).
func (d *StreamDecoder) Flush() string {
	text := d.pending + string(appendLossy(nil, d.raw))
	d.pending, d.raw = "", nil
	return text
}

// firstStop is where the earliest stop string begins in pending, or -1.
func (d *StreamDecoder) firstStop() int {
	at := -1
	for _, s := range d.stops {
		if i := strings.Index(d.pending, s); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	return at
}

// stopPrefix is the length of the longest suffix of pending that is a
// proper prefix of a stop string.
func (d *StreamDecoder) stopPrefix() int {
	best := 0
	for _, s := range d.stops {
		for k := min(len(s)-1, len(d.pending)); k > best; k-- {
			if strings.HasSuffix(d.pending, s[:k]) {
				best = k
				break
			}
		}
	}
	return best
}
