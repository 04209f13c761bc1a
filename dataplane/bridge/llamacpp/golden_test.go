package llamacpp

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// update rewrites the captured answers from a real llama-server:
// go test ./dataplane/bridge/llamacpp -run TestGolden -update
var update = flag.Bool("update", false, "capture testdata from a real llama-server (make llama-server)")

// goldenCommit is the llama.cpp commit the captured answers came from
// (node-llama-cpp 3.21.1's bundle); its build names it as b1-80fb11a.
const goldenCommit = "80fb11ac73e66d89eae2c6a91d8a77428fa733ed"

var goldenDir = filepath.Join("testdata", "llama.cpp-"+goldenCommit[:8])

func golden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenPrompts are the requests captured: the driver's own body (as
// Engine.request builds it) plus what makes llama.cpp leave ids out (a
// grammar spelling characters with byte tokens, their whole-character
// token banned) or fail the stream (a prompt whose greedy output is not
// UTF-8, which llama.cpp's content parser rejects).
var goldenPrompts = []struct {
	name   string
	prompt []uint32
	n      uint32
	extra  map[string]any
}{
	{"completion", seq(1000, 100), 12, nil},
	{"completion_utf8_gaps", seq(1000, 10), 8, map[string]any{"grammar": `root ::= "中中中" "x"`, "logit_bias": [][2]any{{15946, false}}}},
	{"completion_emoji", seq(1000, 10), 12, map[string]any{"grammar": `root ::= "😀😀😀"`, "logit_bias": [][2]any{{141334, false}}}},
	{"completion_error", []uint32{68097, 76420, 48886, 60639, 38777, 59225, 49319, 34334, 18766, 139480, 56274, 77442, 8057, 113336,
		33307, 3983, 72508, 38659, 22469, 68999}, 24, nil},
}

func seq(from uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = from + uint32(i)
	}
	return out
}

// goldenBody is the driver's body for p, streamed or not, as a map.
func goldenBody(t testing.TB, prompt []uint32, n uint32, extra map[string]any, stream bool) map[string]any {
	e := &Engine{Model: testModel}
	body, err := e.request(&wire.Generate{Model: []byte(testModel), MaxTokens: n, TopP: 1, Prompt: wire.TokensOf(prompt)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	m["stream"] = stream
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// TestGoldenCapture rewrites testdata from a real server with -update.
func TestGoldenCapture(t *testing.T) {
	if !*update {
		t.Skip("-update captures testdata from a real llama-server")
	}
	s := realServer(t, 2, 2048)
	ctx := context.Background()
	c := http.DefaultClient
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(goldenDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	get := func(path string) []byte {
		b, err := call(ctx, c, "GET", s.URL, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if p, err := DecodeProps(get("/props")); err != nil || !strings.Contains(goldenCommit, strings.TrimPrefix(p.BuildInfo, "b1-")) {
		t.Fatalf("the server is build %v (%v), the testdata is of %s", p, err, goldenCommit)
	}
	if err := os.MkdirAll(goldenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	write("slots_fresh.json", get("/slots"))
	for _, g := range goldenPrompts {
		write(g.name+".sse", raw(t, s.URL, goldenBody(t, g.prompt, g.n, g.extra, true)))
		if g.name != "completion_error" {
			write(g.name+".json", raw(t, s.URL, goldenBody(t, g.prompt, g.n, g.extra, false)))
		}
	}
	write("completion_too_long.txt", raw(t, s.URL, goldenBody(t, seq(100, 2100), 4, nil, true)))
	write("tokenize.json", must(call(ctx, c, "POST", s.URL, "/tokenize", map[string]any{"content": "Hello 世界 <|im_start|>", "add_special": false, "parse_special": true})))
	write("props.json", get("/props"))
	write("models.json", get("/v1/models"))
	write("metrics.txt", get("/metrics"))
	write("slots_idle.json", get("/slots"))
	done := make(chan []byte)
	go func() { done <- raw(t, s.URL, goldenBody(t, seq(3000, 400), 30, nil, true)) }()
	checkFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		b := get("/slots")
		slots, err := DecodeSlots(b)
		if err != nil || !slices.ContainsFunc(slots, func(s Slot) bool { return s.IsProcessing }) {
			return fmt.Errorf("no slot processing: %v", err)
		}
		write("slots_busy.json", b)
		write("metrics_busy.txt", get("/metrics"))
		return nil
	})
	<-done
}

// raw posts body to /completion and returns the answer: a 200's body, or
// "HTTP <status>\n" and the body.
func raw(t testing.TB, url string, body map[string]any) []byte {
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+"/completion", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Error(err)
		return nil
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(&out, "HTTP %d\n", resp.StatusCode)
	}
	_, _ = out.ReadFrom(resp.Body)
	return out.Bytes()
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
