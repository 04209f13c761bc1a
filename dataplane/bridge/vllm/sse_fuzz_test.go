package vllm

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kvgate/kvgate/dataplane/bridge/bridgeutil"
)

// sseStreams are completion streams as vLLM's OpenAI server writes them
// for the bridge's request (stream, return_token_ids, include_usage and
// continuous_usage_stats): the chunk layout of CompletionStreamResponse,
// the final usage-only chunk and the error event and [DONE] that follow a
// failure, from vllm-project/vllm
// vllm/entrypoints/openai/serving_completion.py at
// 00463e627b4cbe549b5e9815a2bdb0100ae88ea9 (completion_stream_generator);
// the JSON is pydantic's model_dump_json (no spaces), the error event
// Python's json.dumps (spaces).
var sseStreams = map[string]string{
	"length": `data: {"id":"cmpl-8d2f0c1b7a4e4f0e9b8f4c1d2e3f4a5b","object":"text_completion","created":1764578120,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"text":" Paris","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":[785,6722,315,9625,374],"token_ids":[12095]}],"usage":{"prompt_tokens":5,"total_tokens":6,"completion_tokens":1,"prompt_tokens_details":null}}

data: {"id":"cmpl-8d2f0c1b7a4e4f0e9b8f4c1d2e3f4a5b","object":"text_completion","created":1764578120,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"text":".","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,"token_ids":[13]}],"usage":{"prompt_tokens":5,"total_tokens":7,"completion_tokens":2,"prompt_tokens_details":null}}

data: {"id":"cmpl-8d2f0c1b7a4e4f0e9b8f4c1d2e3f4a5b","object":"text_completion","created":1764578120,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"text":" The","logprobs":null,"finish_reason":"length","stop_reason":null,"prompt_token_ids":null,"token_ids":[576]}],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3,"prompt_tokens_details":null}}

data: {"id":"cmpl-8d2f0c1b7a4e4f0e9b8f4c1d2e3f4a5b","object":"text_completion","created":1764578120,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":0}}}

data: [DONE]

`,
	// A stop token, several tokens in one chunk (speculative decoding),
	// and cached prompt tokens in the final usage.
	"stop": `data: {"id":"cmpl-1f","object":"text_completion","created":1764578200,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"text":"Hello! How","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":[151644,872,198,9707,151645],"token_ids":[9707,0,2585]}],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3,"prompt_tokens_details":null}}

data: {"id":"cmpl-1f","object":"text_completion","created":1764578200,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"stop","stop_reason":151645,"prompt_token_ids":null,"token_ids":[151645]}],"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4,"prompt_tokens_details":null}}

data: {"id":"cmpl-1f","object":"text_completion","created":1764578200,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":0}}}

data: [DONE]

`,
	// The engine failed mid-stream (serving_completion.py catches the
	// exception, sends create_streaming_error_response, then [DONE]).
	"error": `data: {"id":"cmpl-2a","object":"text_completion","created":1764578300,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"text":" I","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":[40,1079],"token_ids":[358]}],"usage":{"prompt_tokens":2,"total_tokens":3,"completion_tokens":1,"prompt_tokens_details":null}}

data: {"error": {"message": "The decoder prompt (length 40961) is longer than the maximum model length of 40960.", "type": "BadRequestError", "param": null, "code": 400}}

data: [DONE]

`,
	// Older vLLM's error event: the ErrorResponse with "object": "error".
	"error-v0": `data: {"error": {"object": "error", "message": "Aborted request.", "type": "BadRequestError", "param": null, "code": 400}}

data: [DONE]

`,
	// The engine went away before [DONE].
	"cut": `data: {"id":"cmpl-3b","object":"text_completion","created":1764578400,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":[64],"token_ids":[264]}],"usage":{"prompt_tokens":1,"total_tokens":2,"completion_tokens":1,"prompt_tokens_details":null}}

data: {"id":"cmpl-3b","object":"text_completion","created":1764578400,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"text":" b","logp`,
	// Other servers' habits: CRLF line ends, comments, event names, no
	// space after the colon.
	"crlf": ": ping\r\nevent: completion\r\ndata:{\"choices\":[{\"index\":0,\"text\":\"x\",\"token_ids\":[87],\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\r\n\r\ndata:[DONE]\r\n\r\n",
}

// sseRun is what decoding one stream gave.
type sseRun struct {
	end    sseEnd
	failed bool
	err    string
	chunks []string // each chunk re-encoded
	tokens int
}

func runSSE(tb testing.TB, r io.Reader) sseRun {
	var out sseRun
	end, err := decodeSSE(r, func(c *chunk) error {
		if c.Error != nil {
			tb.Fatalf("error event %q handed over as a chunk", c.Error.Message)
		}
		b, merr := json.Marshal(c)
		if merr != nil {
			tb.Fatal(merr)
		}
		out.chunks = append(out.chunks, string(b))
		for _, ch := range c.Choices {
			out.tokens += len(ch.TokenIDs)
		}
		return nil
	})
	out.end = end
	if err != nil {
		out.failed, out.err = true, err.Error()
	}
	return out
}

// pieceReader hands out its data n bytes a read, as a socket might.
type pieceReader struct {
	data []byte
	n    int
}

func (p *pieceReader) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	k := min(len(b), p.n, len(p.data))
	copy(b, p.data[:k])
	p.data = p.data[k:]
	return k, nil
}

// TestDecodeSSEStreams: each real stream ends as it should and hands over
// the tokens it carries.
func TestDecodeSSEStreams(t *testing.T) {
	for _, c := range []struct {
		name   string
		end    sseEnd
		chunks int
		tokens int
	}{
		{"length", sseDone, 4, 3},
		{"stop", sseDone, 3, 4},
		{"cut", sseCut, 1, 1},
		{"crlf", sseDone, 1, 1},
		{"error", sseEngineError, 1, 1},
		{"error-v0", sseEngineError, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := runSSE(t, strings.NewReader(sseStreams[c.name]))
			if got.end != c.end || len(got.chunks) != c.chunks || got.tokens != c.tokens {
				t.Fatalf("end %d (%s), %d chunks, %d tokens; want end %d, %d chunks, %d tokens",
					got.end, got.err, len(got.chunks), got.tokens, c.end, c.chunks, c.tokens)
			}
		})
	}
}

// FuzzDecodeSSE feeds an engine's stream, arbitrary or real, in reads of a
// fuzzed size. Whatever the bytes, decoding ends with [DONE] exactly when
// it reports no error (an engine's error with a message that fits an
// ERROR frame), hands over no more chunks than the stream has data
// lines and no more tokens than its bytes can spell, and gives the same
// chunks and the same end however the stream is cut into reads. Seeds are
// the real streams above, whole and in reads of 1, 7 and 64 bytes. An
// error event is never handed over as a chunk (it was, and the stream then
// finished as if generation had stopped normally: the seed error-event).
func FuzzDecodeSSE(f *testing.F) {
	for _, name := range slices.Sorted(maps.Keys(sseStreams)) {
		for _, n := range []uint16{0, 1, 7, 64} {
			f.Add([]byte(sseStreams[name]), n)
		}
	}
	f.Fuzz(func(t *testing.T, stream []byte, piece uint16) {
		whole := runSSE(t, bytes.NewReader(stream))
		if (whole.end == sseDone) == whole.failed || whole.end == sseEngineError && (whole.err == "" || len(whole.err) > bridgeutil.MaxEngineMessage) {
			t.Fatalf("end %d with error %q", whole.end, whole.err)
		}
		if whole.end == sseDone && !bytes.Contains(stream, []byte("[DONE]")) {
			t.Fatal("done without [DONE]")
		}
		if n := bytes.Count(stream, []byte("data:")); len(whole.chunks) > n {
			t.Fatalf("%d chunks from %d data lines", len(whole.chunks), n)
		}
		if whole.tokens > len(stream)/2+1 {
			t.Fatalf("%d tokens from %d bytes", whole.tokens, len(stream))
		}
		if piece == 0 {
			return
		}
		split := runSSE(t, &pieceReader{data: stream, n: int(piece)})
		if split.end != whole.end || split.err != whole.err || strings.Join(split.chunks, "\n") != strings.Join(whole.chunks, "\n") {
			t.Fatalf("in reads of %d: end %d %q, %d chunks; whole: end %d %q, %d chunks",
				piece, split.end, split.err, len(split.chunks), whole.end, whole.err, len(whole.chunks))
		}
	})
}

// TestEngineMessageBounded: an error event's message reaches the router cut
// to what an ERROR frame can carry (a frame too long would never be sent,
// and the router would wait on the stream), and an empty one still says
// something.
func TestEngineMessageBounded(t *testing.T) {
	for _, c := range []struct {
		msg  string
		want int
	}{
		{strings.Repeat("é", 40000), bridgeutil.MaxEngineMessage},
		{"", len("an error event without a message")},
	} {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": c.msg, "type": "InternalServerError", "param": nil, "code": 500}})
		got := runSSE(t, strings.NewReader("data: "+string(b)+"\n\ndata: [DONE]\n\n"))
		if got.end != sseEngineError || len(got.err) != c.want {
			t.Fatalf("%d-byte message: end %d, %d-byte error", len(c.msg), got.end, len(got.err))
		}
	}
}
