package tokenize

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

// chatTemplates are the templates of the incremental tests: Qwen3's, the
// Llama 2 / Mistral / Gemma family templates, and two that are not
// append-only, which must be found out by their probes.
func chatTemplates(t *testing.T) (map[string]*ChatTemplate, map[string]appendOnly) {
	t.Helper()
	out := map[string]*ChatTemplate{"qwen3": builtin(t).Chat()}
	// What each template's text says: Mistral v0.1 and Gemma 2 refuse a
	// system message; Mistral v0.3 places tools before the last user
	// message, but there are no tools here.
	// What each takes for a head in the short evaluation: none where
	// the new messages render alone as after the others (Qwen3, Mistral
	// v0.3), a placeholder where roles must alternate from a user message,
	// the own head for head-echo, which repeats the first message's start
	// on every line.
	none, holder, own := noHead, placeholderHead, ownHead
	want := map[string]appendOnly{"qwen3": {ok: true, system: true, short: [2]headKind{none, none}},
		"gemma3": {ok: true, system: true, short: [2]headKind{holder, holder}}, "llama-2-chat": {ok: true, system: true, short: [2]headKind{holder, holder}},
		"mistral-v0.1-instruct": {ok: true, short: [2]headKind{holder, own}}, "mistral-v0.3-instruct-tools": {ok: true, system: true, short: [2]headKind{none, none}},
		"gemma-2-it": {ok: true, short: [2]headKind{holder, own}}, "numbered": {}, "system-last": {ok: true, short: [2]headKind{none, own}},
		"head-echo": {ok: true, system: true}}
	seen := map[string]bool{}
	for _, dir := range []string{"llama2", "gemma3"} {
		tok, err := LoadDir(filepath.Join("testdata", "families", dir))
		if err != nil {
			t.Fatal(err)
		}
		if tok.Chat() != nil {
			out[dir] = tok.Chat()
		}
		var cases []map[string]json.RawMessage
		readJSON(t, "testdata/family_chat_cases.json", &cases)
		for _, c := range cases {
			var name, family, tmpl string
			_ = json.Unmarshal(c["name"], &name)
			_ = json.Unmarshal(c["family"], &family)
			_ = json.Unmarshal(c["template"], &tmpl)
			if family != dir || tmpl == "config" || seen[tmpl] {
				continue
			}
			seen[tmpl] = true
			ct, err := NewChatTemplate(tmpl, tok.Config.BOS, tok.Config.EOS)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = ct
		}
	}
	for name, src := range map[string]string{
		// Numbers turns out of the total: every turn renumbers the others.
		"numbered": `{% for m in messages %}[{{ loop.index }}/{{ messages|length }}] {{ m.role }}: {{ m.content }}
{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}`,
		// Starts every line with the first message's first three bytes.
		"head-echo": `{% for m in messages %}{{ messages[0].content[:3] }}| {{ m.role }}: {{ m.content }}
{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}`,
		// Puts the system prompt before the last user message, as some
		// Mistral templates do.
		"system-last": `{% if messages[0].role == 'system' %}{% set sys = messages[0].content %}{% set msgs = messages[1:] %}{% else %}{% set sys = '' %}{% set msgs = messages %}{% endif %}` +
			`{% for m in msgs %}{% if m.role == 'user' %}[INST] {% if loop.last and sys %}{{ sys }}\n\n{% endif %}{{ m.content }} [/INST]{% else %}{{ m.content }}</s>{% endif %}{% endfor %}`,
	} {
		ct, err := NewChatTemplate(src, "<s>", "</s>")
		if err != nil {
			t.Fatal(err)
		}
		out[name] = ct
	}
	if len(out) != len(want) {
		t.Fatalf("%d templates, %d expectations", len(out), len(want))
	}
	return out, want
}

// randomConversation is a plain conversation of turns user turns.
func randomConversation(r *rand.Rand, turns int, system bool) []plainMessage {
	words := []string{"hello", "router", "  ", "\n", "<think>", "</think>", "[INST]", "<|im_end|>", "日本", "\"q\"", "{{ x }}", "tool", "cache",
		"<tool_response>", "</tool_response>", "<\\/think>"}
	text := func() string {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	var m []plainMessage
	if system {
		m = append(m, plainMessage{"system", text()})
	}
	for i := range turns {
		if i > 0 {
			m = append(m, plainMessage{"assistant", text()})
		}
		m = append(m, plainMessage{"user", text()})
	}
	return m
}

// TestChatIncrementalEqualsFull feeds random conversations to each
// template turn by turn, skipping turns, going back to regenerate and
// repeating them, and checks every rendering against a full one; the
// templates known to be append-only must be found so by their probes, the
// others not.
func TestChatIncrementalEqualsFull(t *testing.T) {
	templates, wantAppendOnly := chatTemplates(t)
	for name, ct := range templates {
		t.Run(name, func(t *testing.T) {
			v := ct.verdict("", nil)
			if w := wantAppendOnly[name]; v.ok != w.ok || v.system != w.system || v.short != w.short {
				t.Fatalf("append-only %v, with a system message %v, placeholder heads %v; want %v, %v, %v",
					v.ok, v.system, v.short, w.ok, w.system, w.short)
			}
			r := rand.New(rand.NewPCG(1, uint64(len(name))))
			for conv := range 40 {
				m := randomConversation(r, 1+r.IntN(12), conv%2 == 0)
				head := 1
				if m[0].Role == "system" {
					head = 2
				}
				for n := head; n <= len(m); n += 2 * (1 + r.IntN(2)) {
					in := probeInput(m[:n], true, nil)
					if r.IntN(5) == 0 { // a regenerated turn: the same prefix, another last message
						alt := append([]plainMessage(nil), m[:n]...)
						alt[n-1].Content += " again"
						checkRender(t, ct, probeInput(alt, true, nil))
					}
					checkRender(t, ct, in)
					checkRender(t, ct, in) // the same turn again
				}
			}
		})
	}
}

// TestChatIncrementalMarkers: under Qwen3's template an earlier assistant
// turn keeps its reasoning while only tool responses follow it, and loses
// it once a user writes again; a user message spelled as a tool response
// must not let the first rendering be reused for the second.
func TestChatIncrementalMarkers(t *testing.T) {
	q := builtin(t).Chat()
	ct, err := NewChatTemplate(q.source, q.bos, q.eos)
	if err != nil {
		t.Fatal(err)
	}
	m := []plainMessage{{"user", "hi"}, {"assistant", "<think>\nr\n</think>\n\nc"},
		{"user", "<tool_response>\nx\n</tool_response>"}, {"assistant", "ok"}, {"user", "plain"}}
	for _, n := range []int{3, 5} {
		checkRender(t, ct, probeInput(m[:n], true, nil))
	}
	// A head content that spells a marker, the other contents clean: the
	// template marks the last message only after such a head.
	marking, err := NewChatTemplate(`{% set mark = messages[0].content.startswith('<last>') %}{% for m in messages %}{{ m.role }}: {{ m.content }}`+
		`{% if mark and loop.last %} (last){% endif %}{{ '\n' }}{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	mark := []plainMessage{{"user", "<last> hi"}, {"assistant", "ok"}, {"user", "more"}, {"assistant", "fine"}, {"user", "end"}}
	for _, n := range []int{1, 3, 5} {
		checkRender(t, marking, probeInput(mark[:n], true, nil))
	}
	for _, c := range []struct {
		content string
		clean   bool
	}{{"plain text < 3 and [x]", true}, {"a </think> b", false}, {"<tool_response>", false}, {"<|im_start|>", false}} {
		if got := cleanContent([]byte(c.content), false, &ct.markers); got != c.clean {
			t.Errorf("%q clean %v", c.content, got)
		}
	}
}

func checkRender(t *testing.T, ct *ChatTemplate, in *ChatInput) {
	t.Helper()
	got, gotErr := ct.Render(in)
	want, wantErr := ct.renderFull(in)
	if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("messages %s\n got %q (%v)\nwant %q (%v)", in.Messages, got, gotErr, want, wantErr)
	}
}

// TestChatIncrementalTakesThePath checks that turn 20 of the 20-turn case
// renders incrementally once turn 19 was rendered, that every chat case
// (tools, tool calls, reasoning: not plain) renders as in full, and that
// the generation prompt and template variables key what is reused.
func TestChatIncrementalTakesThePath(t *testing.T) {
	q := builtin(t).Chat()
	ct, err := NewChatTemplate(q.source, q.bos, q.eos)
	if err != nil {
		t.Fatal(err)
	}
	var cases []map[string]json.RawMessage
	readJSON(t, "testdata/chat_cases.json", &cases)
	for _, c := range cases {
		checkRender(t, ct, chatInputOf(t, c))
	}
	in := chatInputOf(t, cases[len(cases)-1])
	var msgs []json.RawMessage
	if err := json.Unmarshal(in.Messages, &msgs); err != nil {
		t.Fatal(err)
	}
	prev := *in
	prev.Messages, _ = json.Marshal(msgs[:len(msgs)-2])
	in.Messages, _ = json.Marshal(msgs) // compact, as the gateway's are
	checkRender(t, ct, &prev)
	thinking := map[string]json.RawMessage{"enable_thinking": json.RawMessage("false")}
	for _, extra := range []map[string]json.RawMessage{nil, thinking} {
		in.Extra = extra
		tu := ct.newTurn(ct.prefixes, ct.verdict(extraKey(extra), extra), extraKey(extra), in)
		if tu == nil {
			t.Fatal("turn 20 is not a plain conversation")
		}
		out, ok := tu.render()
		if ok != (extra == nil) {
			t.Fatalf("incremental %v with variables %v (turn 19 was rendered without)", ok, extra)
		}
		if want, _ := ct.renderFull(in); ok && out != want {
			t.Fatalf("turn 20 differs\n got %q\nwant %q", out, want)
		}
		checkRender(t, ct, in)
	}
	if n, size := ct.prefixes.len(); n == 0 || size > prefixCacheMaxBytes {
		t.Fatalf("%d prefixes in %d bytes", n, size)
	}
}

// TestPrefixCacheBounded fills a small cache past its bound.
func TestPrefixCacheBounded(t *testing.T) {
	pc := newPrefixCache(64 << 10)
	for i := range 1000 {
		raw := []byte(fmt.Sprintf(`[{"role":"user","content":"%d"},{"role":"assistant","content":"%s"}`, i%7, strings.Repeat("x", i)))
		pc.put(&chatPrefix{raw: raw, headEnd: strings.IndexByte(string(raw), ','), text: string(raw)})
		if _, size := pc.len(); size > 64<<10 {
			t.Fatalf("%d bytes after %d puts", size, i+1)
		}
	}
	for _, b := range pc.buckets {
		if len(b) > prefixBucketMax {
			t.Fatalf("a bucket of %d", len(b))
		}
	}
}

// TestChatIncrementalSharedHead: a hundred conversations with one system
// prompt and one first message, served turn by turn in turns, all render
// their later turns incrementally (their replies part them), and as in
// full.
func TestChatIncrementalSharedHead(t *testing.T) {
	q := builtin(t).Chat()
	ct, err := NewChatTemplate(q.source, q.bos, q.eos)
	if err != nil {
		t.Fatal(err)
	}
	v := ct.verdict("", nil)
	convs := make([][]plainMessage, 100)
	for i := range convs {
		m := []plainMessage{{"system", "You are a helpful assistant."}, {"user", "Hi"}}
		for turn := range 4 {
			m = append(m, plainMessage{"assistant", fmt.Sprintf("reply %d to conversation %d", turn, i)}, plainMessage{"user", "go on"})
		}
		convs[i] = m
	}
	for n := 2; n <= len(convs[0]); n += 2 {
		for _, m := range convs {
			in := probeInput(m[:n], true, nil)
			got, incremental, err := ct.renderTurn(ct.prefixes, v, "", in)
			want, _ := ct.renderFull(in)
			if err != nil || got != want || incremental != (n > 2) {
				t.Fatalf("%d messages: incremental %v, %v, equal %v", n, incremental, err, got == want)
			}
		}
	}
}

// TestUnescapeJSON holds the markers' unescaper to encoding/json on
// escapes of every kind, surrogate pairs and lone surrogates included.
func TestUnescapeJSON(t *testing.T) {
	bodies := []string{`plain`, `a\nb\tc\"d\\e\/f\b\f\r`, `\u003cthink\u003e`, `\ud83d\ude00x`, `\ud83dx`, `\ude00`,
		`\ud83d\u0041`, `\u00e9\u65e5`, `\uD83D\uDE00`, `\q`, `\u12`, `tail\`}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		var b strings.Builder
		for range r.IntN(20) {
			b.WriteRune(rune(r.IntN(0x11000)))
		}
		enc, _ := json.Marshal(b.String())
		bodies = append(bodies, string(enc[1:len(enc)-1]))
	}
	for _, body := range bodies {
		var want string
		wantErr := json.Unmarshal([]byte(`"`+body+`"`), &want)
		got, ok := unescapeJSON(nil, []byte(body))
		if ok != (wantErr == nil) || (ok && string(got) != want) {
			t.Errorf("%q: %q, %v; want %q, %v", body, got, ok, want, wantErr)
		}
	}
}

// TestChatIncrementalTenants: a turn continues only its own tenant's
// remembered rendering.
func TestChatIncrementalTenants(t *testing.T) {
	q := builtin(t).Chat()
	ct, err := NewChatTemplate(q.source, q.bos, q.eos)
	if err != nil {
		t.Fatal(err)
	}
	m := []plainMessage{{"user", "Hi"}, {"assistant", "Hello."}, {"user", "And then?"}}
	for _, tenant := range []string{"a", "b", ""} {
		in := probeInput(m[:1], true, nil)
		in.Tenant = tenant
		if _, err := ct.render(in); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		tenant      string
		incremental bool
	}{{"a", true}, {"b", true}, {"", true}, {"c", false}, {"1:a", false}} {
		in := probeInput(m, true, nil)
		in.Tenant = c.tenant
		r, err := ct.render(in)
		if want, _ := ct.renderFull(in); err != nil || r.text != want || (r.from != nil) != c.incremental {
			t.Errorf("tenant %q: incremental %v, %v, equal %v", c.tenant, r.from != nil, err, r.text == want)
		}
	}
}

// TestPrefixCacheKeepsHotPrefix: conversations that all continue one
// remembered turn (one start, then replies of their own) fill its bucket;
// the turn they continue stays, the bucket drops the least used.
func TestPrefixCacheKeepsHotPrefix(t *testing.T) {
	pc := newPrefixCache(1 << 20)
	start := `[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":"Go on"}`
	hot := &chatPrefix{raw: []byte(start), headEnd: strings.IndexByte(start, '}') + 1, text: "hot"}
	pc.put(hot)
	for i := range 3 * prefixBucketMax {
		raw := []byte(fmt.Sprintf(`%s,{"role":"assistant","content":"%d"}`, start, i))
		if got := pc.longest("", append(raw, ']'), hot.headEnd); got != hot {
			t.Fatalf("turn %d: found %v, want the hot prefix", i, got)
		}
		pc.put(&chatPrefix{raw: raw, headEnd: hot.headEnd, text: "turn"})
	}
}
