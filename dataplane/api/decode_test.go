package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// fastCorpus are bodies that probe where the walker and encoding/json
// could part: keys by case, twice, escaped or not ASCII; values null,
// of the wrong type, at the edges of their type; syntax errors; white
// space everywhere.
var fastCorpus = []string{
	`{"model":"m","prompt":"x","max_tokens":16}`,
	` { "model" : "m" , "prompt" : [ 1 , 2 ] , "max_tokens" : 16 } ` + "\n",
	`{"Model":"m","prompt":"x"}`, `{"MODEL":"m"}`, `{"mOdel":"m","model":"n"}`,
	`{"model":"m","model":"n"}`, `{"max_tokens":1,"max_tokens":null}`, `{"max_tokens":null,"max_tokens":2}`,
	`{"stream_options":{"include_usage":true},"stream_options":{"other":1}}`,
	`{"stream_options":{"INCLUDE_USAGE":true}}`, `{"stream_options":null}`, `{"stream_options":[]}`,
	`{"logit_bias":{"1":2},"logit_bias":{"3":4}}`, `{"logit_bias":{"1":"x"}}`,
	`{"mod\u0065l":"m"}`, `{"modeſ":"m"}`, `{"ſtream":true}`, `{"\u006dodel":"m"}`, `{"":1}`,
	`{"model":"\u00e9t\u00e9\n","prompt":"caf\u00e9 \ud83d\ude00"}`, `{"model":"été","prompt":"日本語"}`,
	`{"model":"a\"b","prompt":"\ud800"}`, "{\"model\":\"\xff\xfe\",\"prompt\":\"x\"}", "{\"model\":\"a\x01\"}",
	`{"max_tokens":-0}`, `{"temperature":-0}`, `{"temperature":-0.0}`, `{"temperature":1e-3}`, `{"temperature":2E+0}`,
	`{"temperature":1e400}`, `{"max_tokens":1.0}`, `{"max_tokens":1e2}`, `{"max_tokens":9223372036854775807}`,
	`{"max_tokens":9223372036854775808}`, `{"max_tokens":123456789012345678}`, `{"max_tokens":-9223372036854775808}`,
	`{"seed":-1}`, `{"seed":-0}`, `{"seed":18446744073709551615}`, `{"seed":18446744073709551616}`, `{"seed":0}`,
	`{"top_p":9007199254740993}`, `{"top_p":-9007199254740993}`, `{"top_k":"5"}`, `{"n":true}`,
	`{"stop_token_ids":[]}`, `{"stop_token_ids":null}`, `{"stop_token_ids":[4294967295]}`, `{"stop_token_ids":[4294967296]}`,
	`{"stop_token_ids":[-0]}`, `{"stop_token_ids":[1.5]}`, `{"stop_token_ids":[null]}`, `{"stop_token_ids":[1,2,3,]}`,
	`{"stop_token_ids":[ 1 , 2 ]}`, `{"stop_token_ids":{}}`,
	`{"stream":null}`, `{"stream":"true"}`, `{"ignore_eos":1}`, `{"echo":false,"echo":true}`, `{"suffix":null}`, `{"suffix":""}`, `{"suffix":3}`,
	`{"user":null}`, `{"user":7}`, `{"prompt":null}`, `{"prompt":{"a":[1,{"b":null}]}}`,
	`{"min_p":0.0,"use_beam_search":false,"skip_special_tokens":true,"bad_words":[],"guided_json":{}}`,
	`{"unknown":{"deep":[[[[[[{}]]]]]]},"model":"m"}`, `{"unknown":[1,2,{"a":"b"}],"x_y":null}`,
	`{"model":"m"} {}`, `{"model":"m"}x`, `{"model":"m",}`, `{"model" "m"}`, `{"model":"m"`, `{"model":tru}`,
	`{"model":01}`, `{"model":-}`, `{"model":1.}`, `{"model":.5}`, `{"model":1e}`, `{"a":[1 2]}`, `{"a":{"b" 1}}`,
	`{"a":{,}}`, `{"a":"\x"}`, `{"a":"\u12G4"}`, `[]`, `null`, `""`, ``, ` `, `{`, `}`, `{}`, `{ }`,
	`{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":false},"add_generation_prompt":false}`,
	`{"messages":null,"tools":null,"tool_choice":null,"response_format":null,"chat_template_kwargs":null,"add_generation_prompt":null}`,
	`{"messages":[{"role":"user","content":"x"}],"messages":[{"role":"bot"}]}`, `{"messages":[{"role":"bot"}],"Model":"m"}`,
	`{"model":"m","messages":[{"role":"bot","content":[{}]}],"x":[1,}`, `{"messages":[{"Role":"user"}],"model":"m"}`,
	`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}],"model":"m"}`,
	`{"messages":[],"model":"m"}`, `{"messages":[{"role":"user"}] ,"model":"m"}`, `{"messages":[{"role":"user"},],"model":"m"}`,
	`{"add_generation_prompt":"yes"}`, `{"chat_template_kwargs":[]}`, `{"Messages":[]}`, `{"max_completion_tokens":5}`,
	`{"metadata":{"user_id":"u"},"metadata":{"other":1}}`, `{"metadata":null}`, `{"metadata":{"USER_ID":"u"}}`, `{"metadata":[]}`,
	`{"stop_sequences":null}`, `{"stop_sequences":[]}`, `{"stop_sequences":["a","b"],"stop_sequences":["c"]}`, `{"stop_sequences":[1]}`,
	`{"thinking":null}`, `{"thinking":{"type":"enabled","budget_tokens":1}}`, `{"Thinking":{"type":"enabled"}}`,
	`{"system":"s","tools":[],"tool_choice":{"type":"auto"},"echo":null,"n":2,"logit_bias":{"1":1}}`,
	`{"a":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `,"model":"m"}`,
}

// TestFastDecodeMatchesEncodingJSON holds the walker to encoding/json:
// wherever it takes a body, encoding/json takes it too, into the same
// struct. The common bodies must take the fast path.
func TestFastDecodeMatchesEncodingJSON(t *testing.T) {
	fast := 0
	for _, s := range append(append([]string{}, fuzzSeeds...), fastCorpus...) {
		if sameAsEncodingJSON(t, []byte(s)) {
			fast++
		}
	}
	for _, s := range fuzzSeeds[:6] {
		if !new(completionBody).walk([]byte(s)) || !new(chatBody).walk([]byte(s)) || !new(messagesBody).walk([]byte(s)) {
			t.Errorf("common body took the slow path: %s", s)
		}
	}
	t.Logf("%d bodies fast", fast)
	if fast < 40 {
		t.Fatalf("only %d bodies took the fast path", fast)
	}
}

// sameAsEncodingJSON checks both bodies on body; true when the walker
// took it for both.
func sameAsEncodingJSON(t *testing.T, body []byte) bool {
	t.Helper()
	c1, c2 := completionBody{}, completionBody{}
	h1, h2 := chatBody{}, chatBody{}
	m1, m2 := messagesBody{}, messagesBody{}
	var pre preNormalized
	chatWalk := func(b []byte) bool { // the messages the walker normalized, checked below
		ok := h2.walk(b)
		pre, h2.pre = h2.pre, preNormalized{}
		return ok
	}
	c, h, m := sameStruct(t, body, &c1, &c2, c2.walk), sameStruct(t, body, &h1, &h2, chatWalk), sameStruct(t, body, &m1, &m2, m2.walk)
	if h && pre.done {
		sink := &imageSink{}
		want, err := normalizeJSON(h1.Messages, sink)
		if string(want) != string(pre.msgs) || fmt.Sprint(err) != fmt.Sprint(pre.err) || !reflect.DeepEqual(sink.images, pre.sink.images) {
			t.Fatalf("%q: messages by encoding/json %s %v %+v, by the walker %s %v %+v", body, want, err, sink.images, pre.msgs, pre.err, pre.sink.images)
		}
	}
	return c && h && m
}

func sameStruct(t *testing.T, body []byte, slow, fast any, walk func([]byte) bool) bool {
	t.Helper()
	e := decodeJSON(body, slow)
	if !walk(body) {
		return false
	}
	if e != nil {
		t.Fatalf("%q: the walker took what encoding/json refuses (%s)", body, e.Message)
	}
	if !reflect.DeepEqual(slow, fast) {
		t.Fatalf("%q: encoding/json %+v, walker %+v", body, slow, fast)
	}
	return true
}

// TestDecodeBodyFallsBack: what the walker does not take is decoded by
// encoding/json from a zero struct, its errors unchanged.
func TestDecodeBodyFallsBack(t *testing.T) {
	var b completionBody
	if e := b.decode([]byte(`{"model":"m","Prompt":"p","max_tokens":3}`)); e != nil || b.Model != "m" || string(b.Prompt) != `"p"` || *b.MaxTokens != 3 {
		t.Fatalf("%+v %v", b, e)
	}
	b = completionBody{}
	e := b.decode([]byte(`{"model":"m","max_tokens":"3"}`))
	if e == nil || e.Param != "max_tokens" || e.Message != `field "max_tokens" must be an integer` {
		t.Fatalf("%+v", e)
	}
	b = completionBody{}
	if e := b.decode([]byte(`{"model":"m","prompt":"x"`)); e == nil || !strings.HasPrefix(e.Message, "malformed JSON") {
		t.Fatalf("%+v", e)
	}
}

// TestBodyKeys: the bodies' JSON names are unique (no two fields of
// embedded structs share one, which encoding/json would drop) and
// jsonKeys sees them all.
func TestBodyKeys(t *testing.T) {
	for _, ty := range []reflect.Type{reflect.TypeFor[completionBody](), reflect.TypeFor[chatBody](), reflect.TypeFor[messagesBody]()} {
		n := 0
		for _, f := range reflect.VisibleFields(ty) {
			if !f.Anonymous && f.IsExported() {
				n++
			}
		}
		if keys := jsonKeys(ty); len(keys) != n {
			t.Fatalf("%v: %d keys for %d fields", ty, len(keys), n)
		}
	}
	if !ignorable([]byte("x_unknown"), chatKeys) || ignorable([]byte("Messages"), chatKeys) || ignorable([]byte("MIN_P"), completionKeys) {
		t.Fatal("ignorable")
	}
}

// FuzzFastDecode: on any bytes, the walker agrees with encoding/json or
// leaves the body to it.
func FuzzFastDecode(f *testing.F) {
	for _, s := range append(append([]string{}, fuzzSeeds...), fastCorpus...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameAsEncodingJSON(t, body)
		w := jsonWalker{b: body}
		w.space()
		if start := w.i; w.i < len(body) && w.value() && !json.Valid(body[start:w.i]) {
			t.Fatalf("the walker took %q, not JSON", body[start:w.i])
		}
	})
}

// benchBody is the completion perf/scripts/proxybench.sh sends.
const benchBody = `{"model":"Qwen/Qwen3-8B","prompt":"Hello, how are you today? Tell me about routers.","max_tokens":16,"ignore_eos":true}`

// BenchmarkDecodeCompletion decodes proxybench's body: the body struct
// by encoding/json and by the walker, and the whole DecodeCompletion (the
// last two with cpu-ns/op, the process's CPU time over b.N).
func BenchmarkDecodeCompletion(b *testing.B) {
	body := []byte(benchBody)
	b.Run("body/encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var c completionBody
			if e := decodeJSON(body, &c); e != nil {
				b.Fatal(e)
			}
		}
	})
	b.Run("body/walker", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		cpu := processCPU()
		for b.Loop() {
			var c completionBody
			if e := c.decode(body); e != nil {
				b.Fatal(e)
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		cpu := processCPU()
		for b.Loop() {
			if _, e := DecodeCompletion(body, nil); e != nil {
				b.Fatal(e)
			}
		}
		reportCPU(b, cpu)
	})
}

// messagesCorpus are message lists where the walker and encoding/json
// could part; the fuzz seeds' conversations are added to them.
var messagesCorpus = []string{
	`[{"role":"user","content":"hi"}]`, ` [ { "role" : "user" , "content" : "a\nb" } , {"role":"assistant","content":null} ] `,
	`[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]`,
	`[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}]`,
	`[{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"https://x.example/a.png"}}]}]`,
	`[{"role":"user","content":"x"},{"role":"bot","content":"y"}]`, `[{"role":"tool","content":"42"}]`,
	`[{"role":"tool","tool_call_id":7,"content":"42"}]`, `[{"role":"tool","tool_call_id":"c\u0031","content":"42"}]`,
	`[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":1}"}}]}]`,
	`[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"","arguments":"{}"}}]}]`, `[{"role":"assistant","tool_calls":null}]`,
	`[{"role":"user","content":"x","role":"system"}]`, `[{"ro\u006ce":"user"}]`, `[{"Role":"user","role":"user"}]`,
	`[{"role":"user","a<b":1}]`, `[{"role":"user","a&b":1}]`, `[{"role":"user","\u00e9":1}]`, `[{"role":"user","x\u007fy":1}]`,
	`[{"role":5}]`, `[{"role":null}]`, `[{"role":"us\u0065r","content":"é\ud800"}]`, `[{"role":"user"},3]`, `[3,{"role":"bot"}]`,
	`[{"role":"bot"},{"role":"user","content":[1]}]`, `[{"role":"bot"},{"role":"user","content":"x"}`, `[]`, `null`, `{}`, `"x"`,
	`[{"role":"user","content":[{"type":"text","text":"a"}]},]`, `[{"role":"user",}]`, `[{"role":"user"}] x`,
	`[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]},{"Role":"user"}]`,
}

// TestNormalizePlainMatchesJSON: normalizeMessages (the walker where it
// can) gives normalizeJSON's bytes, errors and images on every list.
func TestNormalizePlainMatchesJSON(t *testing.T) {
	plain := 0
	for _, raw := range append(seedMessages(t), messagesCorpus...) {
		if sameNormalized(t, []byte(raw)) {
			plain++
		}
	}
	if plain < 15 {
		t.Fatalf("only %d lists took the walker", plain)
	}
}

// seedMessages are the message lists of the fuzz seeds.
func seedMessages(t testing.TB) []string {
	var out []string
	for _, s := range fuzzSeeds {
		var b struct {
			Messages json.RawMessage `json:"messages"`
		}
		if json.Unmarshal([]byte(s), &b) == nil && len(b.Messages) > 0 {
			out = append(out, string(b.Messages))
		}
	}
	return out
}

// sameNormalized checks normalizeMessages against normalizeJSON with an
// image sink and without; true when the walker decided both.
func sameNormalized(t *testing.T, raw []byte) bool {
	t.Helper()
	decided := true
	for _, sink := range []func() *imageSink{func() *imageSink { return nil }, func() *imageSink { return &imageSink{} }} {
		s1, s2 := sink(), sink()
		want, werr := normalizeJSON(raw, s1)
		got, gerr := normalizeMessages(raw, s2)
		if string(want) != string(got) || fmt.Sprint(werr) != fmt.Sprint(gerr) || !reflect.DeepEqual(s1, s2) {
			t.Fatalf("%s:\nencoding/json %s %v %+v\nwalker        %s %v %+v", raw, want, werr, s1, got, gerr, s2)
		}
		if _, ok, _ := normalizePlain(raw, sink()); !ok {
			decided = false
		}
	}
	return decided
}

// FuzzNormalizeMessages: on any bytes, normalizeMessages and
// normalizeJSON agree.
func FuzzNormalizeMessages(f *testing.F) {
	for _, s := range append(seedMessages(f), messagesCorpus...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { sameNormalized(t, raw) })
}
