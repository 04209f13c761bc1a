// Package api holds the codecs of the HTTP APIs kvgate serves, and nothing
// else: it decodes OpenAI Completions and Chat Completions, Anthropic
// Messages and vLLM's tokenize shapes into a Request, encodes responses and
// their event streams, renders errors in each API's own body, and matches
// stop strings in streamed text.
//
// Agents' fields travel both ways. In: tools (Anthropic's become OpenAI's
// shape, each schema checked to be JSON Schema), tool_choice, assistant
// tool calls and tool results (Anthropic's tool_use and tool_result blocks
// become the messages HF's apply_chat_template takes), thinking. Out: a
// chat's text goes through an OutputParser, which splits off <think>
// reasoning (ReasoningParser) and finds the model family's tool calls
// (ToolParser with a ToolSyntax: Hermes/Qwen, Llama 3.1 JSON, DeepSeek
// V3), as Pieces the encoders render as reasoning_content and tool_calls,
// or thinking and tool_use blocks, streamed as they are known.
//
// Sampling and output fields are honoured or refused, never dropped
// (extras.go): presence_penalty, frequency_penalty, repetition_penalty,
// logit_bias, min_tokens and logprobs (chat: logprobs with top_logprobs;
// completions: logprobs n) become Extras, which only engines with the wire
// protocol's SAMPLING feature are sent; the encoders return OpenAI's
// logprobs objects for completions and chat, streamed and whole. echo
// returns a completion's prompt; n choices are each generated on their own,
// concurrently, and joined (JoinChoices, or streamed with their index);
// best_of other than n, suffix, and echo with logprobs are refused, as is
// any other output-changing OpenAI or vLLM field set to other than its
// default (unsupportedFields: min_p, use_beam_search, ...). The Messages
// and Responses APIs refuse the OpenAI fields by name (foreignFields).
//
// It does no I/O and knows no engine, tokenizer or router: the gateway
// (dataplane/gateway) checks what depends on the fleet (is the model
// served, is a token id in the vocabulary, does the prompt fit), tokenizes,
// and writes the bytes the encoders return. Every decoder answers bad input
// with an *Error that names the field, in the status and body shape the API
// defines:
//
//	OpenAI:    {"error": {"message": "...", "type": "...", "param": "...", "code": null}}
//	Anthropic: {"type": "error", "error": {"type": "...", "message": "..."}}
package api
