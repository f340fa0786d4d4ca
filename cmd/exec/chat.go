package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"sync/atomic"

	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/models/deepseekv4"
)

// exec -chat: a conversation that keeps its caches between turns. The
// first turn is the chat prompt (BOS, system, user, assistant prefix) run
// by the prefill graph; every later turn feeds only its new tokens
// (deepseekv4.NextTurn after the answer) through decode calls
// (engine.Session.Feed: the prefill graph starts at position 0 only), so
// the history is never run again.

const (
	bosToken = deepseekv4.BOSToken
	eosToken = deepseekv4.EOSToken
)

// The markers of the conversation on standard output.
const (
	promptMarker = "> "
	endMarker    = "\n[end of turn]\n"
	stopMarker   = "\n[stopped]\n"
	lengthMarker = "\n[answer cut: -max-new-tokens or -max-len reached]\n"
	quitHint     = "\n(Ctrl-C again or Ctrl-D to quit)\n"
)

// conversation is the state kept between turns.
type conversation struct {
	sess   *engine.Session
	v      *vocabulary
	gen    engine.GenerateOptions
	opt    *textOptions
	maxLen int
	turns  int
	// pending is the last answer's last sample when it was not the end of
	// sentence: generated (and shown) but not yet fed.
	pending []int64
}

// turnIDs are the tokens that a user line adds to the conversation.
func (c *conversation) turnIDs(user string) []int64 {
	if c.turns == 0 {
		var msgs []deepseekv4.Message
		if c.opt.system != "" {
			msgs = append(msgs, deepseekv4.Message{Role: deepseekv4.RoleSystem, Content: c.opt.system})
		}
		msgs = append(msgs, deepseekv4.Message{Role: deepseekv4.RoleUser, Content: user})
		return c.v.tok.Encode(deepseekv4.ChatPrompt(msgs, c.opt.thinking))
	}
	return append(append([]int64(nil), c.pending...), c.v.tok.Encode(deepseekv4.NextTurn(user, c.opt.thinking))...)
}

// turn runs one user line and streams the answer to out; interrupted stops
// it. A turn that does not fit in the session's maximum length is refused
// (the conversation goes on: a shorter line may fit).
func (c *conversation) turn(user string, out io.Writer, interrupted func() bool) error {
	ids := c.turnIDs(user)
	// Feeding ids and drawing k tokens takes len(ids) + k - 1 positions
	// (the last sample is not fed).
	room := c.maxLen - c.sess.Pos - len(ids) + 1
	if room < 1 {
		fmt.Fprintf(out, "[refused: this turn needs %d tokens, the conversation has %d of -max-len %d left]\n", len(ids), c.maxLen-c.sess.Pos, c.maxLen)
		return nil
	}
	o := c.gen
	o.MaxNew = min(o.MaxNew, room)
	a, err := c.v.stream(c.sess, ids, o, append(deepseekv4.ChatStops(), c.opt.stops...), out, interrupted)
	if err != nil {
		return err
	}
	c.turns++
	c.pending = c.closing(a)
	switch a.reason {
	case "stopped":
		io.WriteString(out, stopMarker)
	case "length":
		io.WriteString(out, lengthMarker)
	default:
		io.WriteString(out, endMarker)
	}
	return nil
}

// closing is what to feed before the next turn after answer a: its last
// sample unless that was the end of sentence (NextTurn begins with it), and
// in thinking mode the end of the thinking when the answer was cut inside
// it (the next turn's text assumes a closed one).
func (c *conversation) closing(a *answer) []int64 {
	var ids []int64
	if len(a.gen.IDs[0]) > 0 && a.reason != "end" {
		ids = append(ids, a.last)
	}
	end, ok := c.v.tok.ID(deepseekv4.ThinkEnd)
	if c.opt.thinking && ok && a.reason != "end" && !slices.Contains(a.gen.IDs[0], end) {
		ids = append(ids, end)
	}
	return ids
}

// chat reads lines from in and answers each on out. SIGINT during an
// answer stops it; at the prompt a first one prints a hint and a second
// ends the conversation, as does the end of input. (cli.Main's handler,
// which ends the program at once, is replaced for the conversation.)
func chat(c *conversation, in io.Reader, out io.Writer) error {
	c.gen.Rand = rand.New(rand.NewPCG(c.gen.Seed, c.gen.Seed^0x9e3779b97f4a7c15)) // one source over the turns
	sig := make(chan os.Signal, 1)
	signal.Reset(os.Interrupt)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	var answering, stop atomic.Bool
	atPrompt := make(chan struct{}, 1)
	go func() {
		for range sig {
			if answering.Load() {
				stop.Store(true)
				continue
			}
			select {
			case atPrompt <- struct{}{}:
			default:
			}
		}
	}()
	lines := readLines(in)
	hinted := false
	for {
		io.WriteString(out, promptMarker)
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				io.WriteString(out, "\n")
				return nil
			}
			line, hinted = l, false
		case <-atPrompt:
			if hinted {
				io.WriteString(out, "\n")
				return nil
			}
			hinted = true
			io.WriteString(out, quitHint)
			continue
		}
		if line == "" {
			continue
		}
		stop.Store(false)
		answering.Store(true)
		err := c.turn(line, out, stop.Load)
		answering.Store(false)
		if err != nil {
			return err
		}
	}
}

// readLines sends the lines of r (without their newline) until its end.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), maxPromptFile)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}
