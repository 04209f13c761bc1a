package streambench

import (
	"strings"
	"testing"
	"time"
)

func TestReadEvents(t *testing.T) {
	body := "data: {\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n" +
		"data: {\"choices\":[{\"text\":\"b\"}]}\n\n" +
		": a comment\n\n" +
		"data: {\"choices\":[],\"usage\":{\"completion_tokens\":7,\"prompt_tokens\":3}}\n\n" +
		"data: [DONE]\n\n"
	var last []byte
	events, usage, done, err := readEvents(strings.NewReader(body), &last)
	if err != nil || events != 2 || usage != 7 || !done || !strings.Contains(string(last), `"completion_tokens":7`) {
		t.Fatalf("events %d, usage %d, done %v, last %q, err %v", events, usage, done, last, err)
	}
	if _, _, done, _ := readEvents(strings.NewReader("data: {\"choices\":[]}\n\n"), &last); done {
		t.Fatal("a stream without [DONE] read as done")
	}
}

func TestValidate(t *testing.T) {
	o := Defaults()
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "no kvgate binary") {
		t.Fatalf("no binary: %v", err)
	}
	o.Binaries = []Binary{{Label: "a", Path: "/bin/true"}}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.Streams, o.MaxTokens, o.StepMs = []int{0}, 0, -1
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "0 streams") || !strings.Contains(err.Error(), "max tokens 0") ||
		!strings.Contains(err.Error(), "step of -1 ms") {
		t.Fatalf("bad counts: %v", err)
	}
}

func TestWriteTableRatios(t *testing.T) {
	rs := []Result{
		{Label: "before", Streams: 8, Tokens: 1_000_000, Wall: 4 * time.Second, CPU: 3, Events: 500_000},
		{Label: "after", Streams: 8, Tokens: 1_000_000, Wall: time.Second, CPU: 1, Events: 100_000},
	}
	var sb strings.Builder
	WriteTable(&sb, rs)
	out := sb.String()
	for _, want := range []string{"| before | 8 | 1000000 | 4.00 | 250000 | 3.00 | 3.00 | 2.00 | 6.0 |",
		"| after | 8 | 1000000 | 1.00 | 1000000 | 1.00 | 1.00 | 10.00 | 10.0 |",
		"- 8 streams, after vs before: tokens/s x4.00, CPU per million tokens x3.00 lower, CPU per SSE event x0.60 lower"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in\n%s", want, out)
		}
	}
}
