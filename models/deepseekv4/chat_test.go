package deepseekv4

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/ds4go/ds4/tokenizer"
)

const effort75 = "Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the reasoning)\n\n"

// The first five expected strings are the release's encoding/encoding.py
// (encode_messages, default arguments) as run and recorded in a public
// third-party audit of a V4.1 engine ("官方编码器实跑": chat/thinking with and
// without a system message, and a multi-turn conversation with a
// mid-conversation system message); the code read is the release file as
// vendored in ztxz16/fastllm tools/fastllm_pytools/encoding_dsv41.py.
// The thinking-history cases are derived by hand from that code.
func TestChatPromptReference(t *testing.T) {
	sys := Message{Role: RoleSystem, Content: "S"}
	user := Message{Role: RoleUser, Content: "U"}
	cases := []struct {
		name     string
		msgs     []Message
		thinking bool
		want     string
	}{
		{"chat+system", []Message{sys, user}, false,
			"<｜begin▁of▁sentence｜><｜System｜>S<｜User｜>U<｜Assistant｜></think>"},
		{"chat", []Message{user}, false,
			"<｜begin▁of▁sentence｜><｜User｜>U<｜Assistant｜></think>"},
		{"thinking+system", []Message{sys, user}, true,
			"<｜begin▁of▁sentence｜><｜System｜>" + effort75 + "S<｜User｜>U<｜Assistant｜><think>"},
		{"thinking", []Message{user}, true,
			"<｜begin▁of▁sentence｜><｜System｜>" + effort75 + "<｜User｜>U<｜Assistant｜><think>"},
		{"multi-turn mid system", []Message{sys, {Role: RoleUser, Content: "q1"},
			{Role: RoleAssistant, Content: "a1"}, {Role: RoleSystem, Content: "mid"},
			{Role: RoleUser, Content: "q2"}}, false,
			"<｜begin▁of▁sentence｜><｜System｜>S<｜User｜>q1<｜Assistant｜></think>a1<｜end▁of▁sentence｜>" +
				"<｜System｜>mid<｜User｜>q2<｜Assistant｜></think>"},
		// drop_thinking: the earlier turn's reasoning is dropped and its
		// header closes the thinking at once; only the last gets <think>.
		{"thinking history", []Message{{Role: RoleUser, Content: "q1"},
			{Role: RoleAssistant, Content: "a1", Reasoning: "r1"}, {Role: RoleUser, Content: "q2"}}, true,
			"<｜begin▁of▁sentence｜><｜System｜>" + effort75 + "<｜User｜>q1<｜Assistant｜></think>a1<｜end▁of▁sentence｜>" +
				"<｜User｜>q2<｜Assistant｜><think>"},
		// An assistant turn after the last user keeps its reasoning.
		{"thinking last answer", []Message{{Role: RoleUser, Content: "q1"},
			{Role: RoleAssistant, Content: "a1", Reasoning: "r1"}}, true,
			"<｜begin▁of▁sentence｜><｜System｜>" + effort75 + "<｜User｜>q1<｜Assistant｜><think>r1</think>a1<｜end▁of▁sentence｜>"},
	}
	for _, c := range cases {
		if got := ChatPrompt(c.msgs, c.thinking); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// A conversation continued with NextTurn (caches kept, the sampled end of
// sentence not fed) is the reference's rendering with drop_thinking=False.
func TestNextTurnContinuesTheConversation(t *testing.T) {
	for _, thinking := range []bool{false, true} {
		first := []Message{{Role: RoleSystem, Content: "Be brief."}, {Role: RoleUser, Content: "Hi"}}
		answer1 := Message{Role: RoleAssistant, Content: "Hello.", Reasoning: "greet"}
		answer2 := Message{Role: RoleAssistant, Content: "Four.", Reasoning: "2+2"}
		gen := func(a Message) string { // what the model generates after the prefix
			if thinking {
				return a.Reasoning + ThinkEnd + a.Content
			}
			return a.Content
		}
		got := ChatPrompt(first, thinking) + gen(answer1) + NextTurn("2+2?", thinking) + gen(answer2) +
			NextTurn("Thanks", thinking)
		all := append(first, answer1, Message{Role: RoleUser, Content: "2+2?"}, answer2,
			Message{Role: RoleUser, Content: "Thanks"})
		if want := renderChat(all, thinking, false); got != want {
			t.Errorf("thinking=%v:\n got %q\nwant %q", thinking, got, want)
		}
	}
}

func TestChatPromptUnknownRolePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("role \"tool\" was rendered")
		}
	}()
	ChatPrompt([]Message{{Role: "tool", Content: "x"}}, false)
}

// The tiny checkpoint's tokenizer has every chat token as one id, so a chat
// prompt encodes them as the model's own tokens (ids of
// testdata/tiny/tokenizer.json; Hugging Face tokenizers gives
// [0 507 42 75 508 510] for BOS User "Hi" Assistant <think>).
func TestChatPromptTinyTokens(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join("..", "..", "testdata", "tiny", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	prompt := ChatPrompt([]Message{{Role: RoleSystem, Content: "Be brief."}, {Role: RoleUser, Content: "Hi"}}, true)
	ids := tok.Encode(prompt)
	for _, s := range []string{BOSToken, SystemToken, UserToken, AssistantToken, ThinkStart} {
		id, ok := tok.ID(s)
		if !ok || !slices.Contains(ids, id) {
			t.Errorf("%s (id %d, known %v) is not among the prompt's ids %v", s, id, ok, ids)
		}
	}
	if got := tok.Encode(BOSToken + UserToken + "Hi" + AssistantToken + ThinkStart); !slices.Equal(got, []int64{0, 507, 42, 75, 508, 510}) {
		t.Errorf("ids %v, Hugging Face tokenizers gives [0 507 42 75 508 510]", got)
	}
	if got := tok.Decode(ids); got != prompt {
		t.Errorf("decode gives %q, want the prompt %q", got, prompt)
	}
}
