package deepseekv4

import (
	"fmt"
	"strings"
)

// The chat format of DeepSeek V4.1, as the release's encoding/encoding.py
// renders it (encode_messages; SGLang's encoding_dsv41.py is adapted from
// it). Only the text roles are here: no tools, tasks or images.

// The chat tokens (added tokens of the tokenizer; V4.1's tokenizer has
// <｜System｜>, V3's does not).
const (
	BOSToken       = "<｜begin▁of▁sentence｜>"
	EOSToken       = "<｜end▁of▁sentence｜>"
	SystemToken    = "<｜System｜>"
	UserToken      = "<｜User｜>"
	AssistantToken = "<｜Assistant｜>"
	ThinkStart     = "<think>"
	ThinkEnd       = "</think>"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// DefaultReasoningEffort is the release's default effort ("high" = 75; the
// reference maps low/high/max to 50/75/100).
const DefaultReasoningEffort = 75

// Message is one turn of a conversation. Reasoning is an assistant turn's
// thinking text (without the <think> tags).
type Message struct {
	Role, Content, Reasoning string
}

// effortPrefix is the thinking mode's first system text.
func effortPrefix() string {
	return fmt.Sprintf("Reasoning Effort: %d (range 1-100, the higher the value, the more thorough the reasoning)\n\n",
		DefaultReasoningEffort)
}

// ChatPrompt is the text to encode for msgs, as encode_messages renders it
// with its defaults (BOS added, earlier turns' reasoning dropped). When the
// last message is a user or system turn it ends with the assistant prefix:
// "<｜Assistant｜><think>" in thinking mode, "<｜Assistant｜></think>"
// otherwise. Roles other than the three above panic.
func ChatPrompt(msgs []Message, thinking bool) string {
	return renderChat(msgs, thinking, true)
}

// NextTurn is the text to feed after the model's answer (the sampled end of
// sentence not fed) to continue a conversation whose caches are kept: the
// end of the answer, the user turn and the next assistant prefix. A
// conversation built as ChatPrompt(first turns) + answer + NextTurn(...)
// is what encode_messages renders with drop_thinking=False (earlier
// reasoning kept, as the caches hold it).
func NextTurn(user string, thinking bool) string {
	return EOSToken + UserToken + user + assistantPrefix(thinking)
}

// ChatStops are the stop strings of an assistant turn.
func ChatStops() []string { return []string{EOSToken} }

func assistantPrefix(thinking bool) string {
	if thinking {
		return AssistantToken + ThinkStart
	}
	return AssistantToken + ThinkEnd
}

// lastUserIndex is find_last_user_index: a system message after the first
// counts as a user turn.
func lastUserIndex(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser || (msgs[i].Role == RoleSystem && i > 0) {
			return i
		}
	}
	return -1
}

// renderChat is _encode_messages_text for text messages; drop is its
// drop_thinking (earlier assistant turns lose their reasoning).
func renderChat(msgs []Message, thinking, drop bool) string {
	last := lastUserIndex(msgs)
	var b strings.Builder
	b.WriteString(BOSToken)
	for i, m := range msgs {
		effort := ""
		if i == 0 && thinking {
			effort = effortPrefix()
		}
		if i == 0 && (effort != "" || m.Role == RoleSystem) {
			b.WriteString(SystemToken)
		}
		b.WriteString(effort)
		switch m.Role {
		case RoleSystem:
			if i > 0 {
				b.WriteString(SystemToken)
			}
			b.WriteString(m.Content)
		case RoleUser:
			b.WriteString(UserToken + m.Content)
		case RoleAssistant:
			if thinking && (!drop || i > last) {
				b.WriteString(m.Reasoning + ThinkEnd)
			}
			b.WriteString(m.Content + EOSToken)
		default:
			panic(fmt.Sprintf("deepseekv4: chat message %d has role %q", i, m.Role))
		}
		if i+1 < len(msgs) && msgs[i+1].Role != RoleAssistant {
			continue
		}
		if m.Role == RoleUser || (m.Role == RoleSystem && i > 0) {
			// The generation header; earlier turns under drop_thinking
			// close the (dropped) thinking at once.
			b.WriteString(assistantPrefix(thinking && (!drop || i >= last)))
		}
	}
	return b.String()
}
