package tokenize

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// chatCorpus is every template and conversation in testdata, each with
// the tokenizer its ids are checked with (the family's, else Qwen3's).
type chatCorpus struct {
	name   string
	tok    *Tokenizer
	tmpl   *ChatTemplate
	inputs []*ChatInput
}

func loadChatCorpus(t *testing.T) []chatCorpus {
	t.Helper()
	qwen, err := loadBuiltin() // a private copy: the tests swap its template
	if err != nil {
		t.Fatal(err)
	}
	var out []chatCorpus
	var cases []map[string]json.RawMessage
	readJSON(t, "testdata/chat_cases.json", &cases)
	q := builtin(t).Chat()
	qt, err := NewChatTemplate(q.source, q.bos, q.eos)
	if err != nil {
		t.Fatal(err)
	}
	c := chatCorpus{name: "qwen3", tok: qwen, tmpl: qt}
	for _, cs := range cases {
		c.inputs = append(c.inputs, chatInputOf(t, cs))
	}
	out = append(out, c)

	var fam []map[string]json.RawMessage
	readJSON(t, "testdata/family_chat_cases.json", &fam)
	for _, dir := range []string{"llama2", "gemma3", "gptoss", "deepseek_v3"} {
		tok, err := LoadDir(filepath.Join("testdata", "families", dir))
		if err != nil {
			t.Fatal(err)
		}
		byTemplate := map[string]*chatCorpus{}
		for _, cs := range fam {
			var family, tmpl string
			_ = json.Unmarshal(cs["family"], &family)
			_ = json.Unmarshal(cs["template"], &tmpl)
			if family != dir {
				continue
			}
			if byTemplate[tmpl] == nil {
				ct := tok.Chat()
				if tmpl != "config" {
					if ct, err = NewChatTemplate(tmpl, tok.Config.BOS, tok.Config.EOS); err != nil {
						t.Fatal(err)
					}
				}
				ct.clock = chatGoldenClock
				byTemplate[tmpl] = &chatCorpus{name: fmt.Sprintf("%s-%d", dir, len(byTemplate)), tok: tok, tmpl: ct}
			}
			for _, k := range []string{"family", "source", "template"} {
				delete(cs, k)
			}
			byTemplate[tmpl].inputs = append(byTemplate[tmpl].inputs, chatInputOf(t, cs))
		}
		for _, c := range byTemplate {
			out = append(out, *c)
		}
	}

	var vision struct {
		Templates map[string]string            `json:"templates"`
		Cases     []map[string]json.RawMessage `json:"cases"`
	}
	readJSON(t, "testdata/vision_chat_cases.json", &vision)
	byTemplate := map[string]*chatCorpus{}
	for _, cs := range vision.Cases {
		var tmpl string
		_ = json.Unmarshal(cs["template"], &tmpl)
		if byTemplate[tmpl] == nil {
			ct, err := NewChatTemplate(vision.Templates[tmpl], "<bos>", "<eos>")
			if err != nil {
				t.Fatal(err)
			}
			byTemplate[tmpl] = &chatCorpus{name: "vision-" + tmpl, tok: qwen, tmpl: ct}
		}
		for _, k := range []string{"template", "tokenizer", "source", "differs"} {
			delete(cs, k)
		}
		byTemplate[tmpl].inputs = append(byTemplate[tmpl].inputs, chatInputOf(t, cs))
	}
	for _, c := range byTemplate {
		out = append(out, *c)
	}
	return out
}

// turnsOf returns in as a client sends it turn by turn: every prefix of
// its messages with the generation prompt, then in itself.
func turnsOf(t *testing.T, in *ChatInput) []*ChatInput {
	var msgs []json.RawMessage
	if err := json.Unmarshal(in.Messages, &msgs); err != nil {
		return []*ChatInput{in}
	}
	var out []*ChatInput
	for n := 1; n <= len(msgs); n++ {
		turn := *in
		turn.Messages, _ = json.Marshal(msgs[:n])
		turn.AddGenerationPrompt = true
		out = append(out, &turn)
	}
	return append(out, in)
}

// checkEncode encodes each input in turn through c's caches and reports
// how many reused ids; each must equal a full render and a full encode.
func checkEncode(t *testing.T, c chatCorpus, inputs []*ChatInput) int {
	t.Helper()
	c.tok.chat = c.tmpl
	reused := 0
	for _, in := range inputs {
		wantText, wantErr := c.tmpl.renderFull(in)
		p, err := c.tok.RenderChat(in)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("messages %s: error %v, want %v", in.Messages, err, wantErr)
		}
		if err != nil {
			continue
		}
		if p.Text != wantText {
			t.Fatalf("messages %s\n got %q\nwant %q", in.Messages, p.Text, wantText)
		}
		got, want := p.Encode(nil), c.tok.Encode(nil, wantText, false)
		if !slices.Equal(got, want) {
			t.Fatalf("messages %s: ids differ (%d reused)\n got %v\nwant %v", in.Messages, p.Reused(), got, want)
		}
		if p.Reused() > 0 {
			reused++
		}
	}
	return reused
}

// TestChatEncodeIncrementalEqualsFull: for every template and
// conversation in testdata (chat, family and vision cases), sent turn by
// turn, and for random plain conversations under each template (turns
// skipped, regenerated, repeated), the ids reusing the previous turn's
// equal a full render's full encode. Qwen3's 20-turn case must reuse ids.
func TestChatEncodeIncrementalEqualsFull(t *testing.T) {
	for _, c := range loadChatCorpus(t) {
		t.Run(c.name, func(t *testing.T) {
			reused := 0
			for _, in := range c.inputs {
				reused += checkEncode(t, c, turnsOf(t, in))
			}
			r := rand.New(rand.NewPCG(7, uint64(len(c.name))))
			for conv := range 30 {
				m := randomConversation(r, 1+r.IntN(10), conv%2 == 0)
				if conv%3 == 0 {
					for i := range m {
						m[i].Content = strings.Repeat(m[i].Content+"longer text ", 30)
					}
				}
				var inputs []*ChatInput
				for n := 1; n <= len(m); n += 1 + r.IntN(3) {
					inputs = append(inputs, probeInput(m[:n], true, nil))
					if r.IntN(4) == 0 {
						alt := append([]plainMessage(nil), m[:n]...)
						alt[n-1].Content += " again"
						inputs = append(inputs, probeInput(alt, true, nil), probeInput(m[:n], true, nil))
					}
				}
				reused += checkEncode(t, c, inputs)
			}
			t.Logf("%d turns reused ids", reused)
			if c.name == "qwen3" && reused == 0 {
				t.Fatal("no turn reused ids")
			}
		})
	}
}

// TestChatEncodeCutMargin: Gemma 3 spells runs of newlines as added
// tokens, so under a template that ends each message with "\n\n" and
// starts every later one with "\n" a turn's last token ("\n\n", before
// the generation prompt) is not what the next turn has there ("\n\n\n");
// ids are reused only up to a cut the longest added token away from the
// end.
func TestChatEncodeCutMargin(t *testing.T) {
	tok, err := LoadDir(filepath.Join("testdata", "families", "gemma3"))
	if err != nil {
		t.Fatal(err)
	}
	ct, err := NewChatTemplate("{% for m in messages %}{% if not loop.first %}{{ '\\n' }}{% endif %}{{ m.role }}: {{ m.content }}\n\n{% endfor %}"+
		"{% if add_generation_prompt %}model:{% endif %}", "<bos>", "<eos>")
	if err != nil {
		t.Fatal(err)
	}
	var m []plainMessage
	for i := range 6 {
		m = append(m, plainMessage{"user", fmt.Sprintf("question %d\n\nin two paragraphs", i)}, plainMessage{"assistant", fmt.Sprintf("answer %d\n\nalso two", i)})
	}
	var inputs []*ChatInput
	for n := 1; n <= len(m); n += 2 {
		inputs = append(inputs, probeInput(m[:n], true, nil))
	}
	if reused := checkEncode(t, chatCorpus{tok: tok, tmpl: ct}, inputs); reused == 0 {
		t.Fatal("no turn reused ids")
	}
}

// TestChatEncodeConcurrent serves the same conversations turn by turn
// from four goroutines at once (they continue, remember and attach ids
// to the same prefixes); every turn's ids equal a full encode. Run it
// with -race.
func TestChatEncodeConcurrent(t *testing.T) {
	tok, err := loadBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	convs := make([][]plainMessage, 8)
	for i := range convs {
		convs[i] = randomConversation(r, 8, i%2 == 0)
		for k := range convs[i] {
			convs[i][k].Content = strings.Repeat(convs[i][k].Content+"and some more words ", 20)
		}
	}
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for _, m := range convs {
				for n := 1; n <= len(m); n++ {
					in := probeInput(m[:n], true, nil)
					got, text, err := tok.EncodeChat(nil, in)
					want, wantErr := tok.Chat().renderFull(in)
					if err != nil || wantErr != nil || text != want || !slices.Equal(got, tok.Encode(nil, want, false)) {
						errs <- fmt.Errorf("goroutine %d, %d messages: %v, %v, text equal %v", g, n, err, wantErr, text == want)
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
