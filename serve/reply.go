package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// reply writes one request's answer: a JSON body at the end, or Server-Sent
// Events as the text comes (begun at the first text, so a request that
// fails before it still gets its HTTP status).
type reply struct {
	s                  *Server
	w                  http.ResponseWriter
	j                  *job
	model, id          string
	created            int64
	content, reasoning strings.Builder
	completion         int // tokens generated
	outcome            string
	started            bool
	// lost, when set, is called once a write fails (the client stopped
	// reading or went away): it cancels the request, so its slot is freed.
	lost func(error)
}

// add takes one event's text.
func (a *reply) add(ev event) {
	if ev.content != "" || ev.reasoning != "" {
		a.completion++ // at least: a token may hold no text yet (done sets the count)
	}
	if !a.j.stream {
		a.content.WriteString(ev.content)
		a.reasoning.WriteString(ev.reasoning)
		return
	}
	if ev.content == "" && ev.reasoning == "" {
		return
	}
	a.begin()
	if a.j.chat {
		d := &chatOut{}
		if ev.reasoning != "" {
			d.ReasoningContent = &ev.reasoning
		}
		if ev.content != "" {
			d.Content = &ev.content
		}
		a.send(a.chatChunk(d, nil))
	} else {
		a.send(a.completionChunk(ev.content, nil))
	}
}

// begin starts the event stream (chat: with the assistant role).
func (a *reply) begin() {
	if a.started {
		return
	}
	a.started = true
	h := a.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	a.w.WriteHeader(http.StatusOK)
	if a.j.chat {
		empty := ""
		a.send(a.chatChunk(&chatOut{Role: "assistant", Content: &empty}, nil))
	}
}

func (a *reply) chatChunk(d *chatOut, finish *string) chatResponse {
	return chatResponse{ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model,
		Choices: []chatChoice{{Delta: d, FinishReason: finish}}}
}

func (a *reply) completionChunk(text string, finish *string) completionResponse {
	return completionResponse{ID: a.id, Object: "text_completion", Created: a.created, Model: a.model,
		Choices: []completionChoice{{Text: text, FinishReason: finish}}}
}

// send writes one event and flushes it to the client.
func (a *reply) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = fmt.Appendf(nil, `{"error":{"message":%q,"type":"server_error"}}`, err.Error())
	}
	a.raw(b)
}

// writeTimeout bounds one event's write: a client that stops reading
// loses its connection (and so its request) instead of holding the
// handler until the connection dies.
const writeTimeout = 30 * time.Second

func (a *reply) raw(b []byte) {
	rc := http.NewResponseController(a.w)
	_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout)) // unsupported writers keep no deadline
	msg := make([]byte, 0, len(b)+8)
	msg = append(append(append(msg, "data: "...), b...), "\n\n"...)
	_, err := a.w.Write(msg)
	if err == nil {
		err = rc.Flush()
	}
	if err != nil && !errors.Is(err, http.ErrNotSupported) && a.lost != nil {
		a.lost(err)
	}
}

// done writes the end of the answer: its finish reason and usage.
func (a *reply) done(ev event) {
	a.completion, a.outcome = ev.completionTokens, ev.finish
	u := &usage{PromptTokens: ev.promptTokens, CompletionTokens: ev.completionTokens, TotalTokens: ev.promptTokens + ev.completionTokens}
	reason := ev.finish
	if !a.j.stream {
		if a.j.chat {
			m := &chatOut{Role: "assistant"}
			content := a.content.String()
			m.Content = &content
			if r := a.reasoning.String(); r != "" || (a.j.thinking) {
				m.ReasoningContent = &r
			}
			writeJSON(a.w, chatResponse{ID: a.id, Object: "chat.completion", Created: a.created, Model: a.model,
				Choices: []chatChoice{{Message: m, FinishReason: &reason}}, Usage: u})
			return
		}
		writeJSON(a.w, completionResponse{ID: a.id, Object: "text_completion", Created: a.created, Model: a.model,
			Choices: []completionChoice{{Text: a.content.String(), FinishReason: &reason}}, Usage: u})
		return
	}
	a.begin()
	if a.j.chat {
		a.send(a.chatChunk(&chatOut{}, &reason))
		if a.j.usage {
			a.send(chatResponse{ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model, Choices: []chatChoice{}, Usage: u})
		}
	} else {
		a.send(a.completionChunk("", &reason))
		if a.j.usage {
			a.send(completionResponse{ID: a.id, Object: "text_completion", Created: a.created, Model: a.model, Choices: []completionChoice{}, Usage: u})
		}
	}
	a.raw([]byte("[DONE]"))
}

// fail ends the answer with e: its status and error body, or, once the
// stream has begun, an error event and the end of the stream.
func (a *reply) fail(e *apiError) {
	a.outcome = fmt.Sprintf("failed %d (%s)", e.Status, e.Message)
	if !a.started {
		writeError(a.w, e)
		return
	}
	a.send(map[string]*apiError{"error": e})
	a.raw([]byte("[DONE]"))
}
