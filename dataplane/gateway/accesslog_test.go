package gateway

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/httpx"
	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/wire"
)

// accessLine is an access log line as JSON decodes it.
type accessLine struct {
	Msg        string  `json:"msg"`
	Request    string  `json:"request"`
	Method     string  `json:"method"`
	Path       string  `json:"path"`
	API        string  `json:"api"`
	Stream     bool    `json:"stream"`
	Client     string  `json:"client"`
	Model      string  `json:"model"`
	Engine     string  `json:"engine"`
	Policy     string  `json:"policy"`
	Routes     int     `json:"routes"`
	Prompt     int     `json:"prompt_tokens"`
	Cached     int     `json:"cached_tokens"`
	Completion int     `json:"completion_tokens"`
	TTFT       float64 `json:"ttft_ms"`
	Duration   float64 `json:"duration_ms"`
	Status     int     `json:"status"`
	Error      string  `json:"error"`
	TraceID    string  `json:"trace_id"`
}

// accessLog is a test gateway's access log: JSON lines.
type accessLog struct{ buf *syncBuffer }

func newAccessObserver(sample float64) (*Observer, accessLog) {
	buf := &syncBuffer{}
	return &Observer{Log: slog.New(slog.NewJSONHandler(buf, nil)), Sample: sample, Policy: route.PolicyKV}, accessLog{buf}
}

// lines decodes every access line logged so far.
func (l accessLog) lines(t *testing.T) []accessLine {
	t.Helper()
	var out []accessLine
	for _, s := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if s == "" {
			continue
		}
		var a accessLine
		if err := json.Unmarshal([]byte(s), &a); err != nil {
			t.Fatalf("access line %q: %v", s, err)
		}
		if a.Msg != "access" {
			t.Fatalf("a line of the access log is not an access line: %s", s)
		}
		out = append(out, a)
	}
	return out
}

// waitLines waits for n access lines (each is written after its
// response).
func (l accessLog) waitLines(t *testing.T, n int) []accessLine {
	t.Helper()
	waitFor(t, func() bool { return len(l.lines(t)) >= n })
	return l.lines(t)
}

func TestAccessLogOnePerRequest(t *testing.T) {
	o, log := newAccessObserver(1)
	gw := startGatewayWith(t, gwOptions{observe: o})
	var usage struct {
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
			Details    struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	resp, body := post(t, gw.base+"/v1/chat/completions", "", `{"model":"`+model+`","messages":[{"role":"user","content":"hello there"}],"max_tokens":5}`)
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &usage) != nil {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	streamed, _ := post(t, gw.base+"/v1/completions", "", `{"model":"`+model+`","prompt":"one two three","max_tokens":4,"stream":true}`)
	bad, _ := post(t, gw.base+"/v1/completions", "", `{"model":"`+model+`","prompt":`)
	unknown, _ := post(t, gw.base+"/v1/completions", "", `{"model":"no-such-model","prompt":"x"}`)
	get(t, gw.base+"/health") // health checks are not logged
	lines := log.waitLines(t, 4)
	if len(lines) != 4 {
		t.Fatalf("%d access lines for 4 requests: %+v", len(lines), lines)
	}
	// A line is written once its response is done, which can be after the
	// client has read it and sent the next request: find lines by id.
	byID := make(map[string]accessLine, len(lines))
	for _, l := range lines {
		byID[l.Request] = l
	}
	chat := byID[resp.Header.Get("x-request-id")]
	want := accessLine{Msg: "access", Request: resp.Header.Get("x-request-id"), Method: "POST", Path: "/v1/chat/completions",
		API: "chat.completions", Model: model, Engine: resp.Header.Get("x-kvgate-engine"), Policy: "kv", Routes: 1,
		Prompt: usage.Usage.Prompt, Cached: usage.Usage.Details.Cached, Completion: usage.Usage.Completion, Status: 200}
	got := chat
	got.Client, got.TTFT, got.Duration = "", 0, 0
	if got != want {
		t.Fatalf("chat access line\n got %+v\nwant %+v", got, want)
	}
	if _, _, err := net.SplitHostPort(chat.Client); err != nil || chat.TTFT <= 0 || chat.Duration < chat.TTFT || chat.Completion != 5 {
		t.Fatalf("chat access line: client %q, ttft %v ms, duration %v ms, completion %d", chat.Client, chat.TTFT, chat.Duration, chat.Completion)
	}
	if s := byID[streamed.Header.Get("x-request-id")]; s.Request != streamed.Header.Get("x-request-id") || !s.Stream || s.API != "completions" || s.Status != 200 ||
		s.Completion != 4 || s.Engine == "" || s.Prompt == 0 {
		t.Fatalf("streamed access line %+v", s)
	}
	if b := byID[bad.Header.Get("x-request-id")]; b.Request != bad.Header.Get("x-request-id") || b.Status != 400 || b.Model != "" || b.Routes != 0 || b.Engine != "" || b.Error == "" {
		t.Fatalf("undecodable request's access line %+v", b)
	}
	if u := byID[unknown.Header.Get("x-request-id")]; u.Request != unknown.Header.Get("x-request-id") || u.Status != 404 || u.Routes != 0 || !strings.Contains(u.Error, "no-such-model") {
		t.Fatalf("unknown model's access line %+v", u)
	}
	waitInflightZero(t, gw.srv)
}

// A client that leaves mid-stream is logged once, 499, with the tokens it
// was sent before it left.
func TestAccessLogClientGone(t *testing.T) {
	o, log := newAccessObserver(1)
	gw := startGatewayWith(t, gwOptions{observe: o, realTime: true})
	c, err := net.Dial("tcp", strings.TrimPrefix(gw.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"` + model + `","prompt":"count to a thousand","max_tokens":2000,"ignore_eos":true,"stream":true}`
	if _, err := c.Write([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(c)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if strings.HasPrefix(line, "data: ") { // a first token came
			break
		}
	}
	c.Close()
	lines := log.waitLines(t, 1)
	if len(lines) != 1 || lines[0].Status != 499 || !lines[0].Stream || lines[0].Completion == 0 || lines[0].Completion >= 2000 || lines[0].TTFT <= 0 {
		t.Fatalf("access lines of a client that left: %+v", lines)
	}
	waitInflightZero(t, gw.srv)
}

// A request no engine can serve is logged with its status and why.
func TestAccessLogRouteRefusal(t *testing.T) {
	o, log := newAccessObserver(1)
	gw := startGatewayWith(t, gwOptions{observe: o, noSampling: true})
	resp, _ := post(t, gw.base+"/v1/completions", "", `{"model":"`+model+`","prompt":"x","max_tokens":2,"presence_penalty":0.5}`)
	lines := log.waitLines(t, 1)
	if l := lines[0]; resp.StatusCode != 400 || l.Status != 400 || l.Routes != 1 || l.Engine != "" || !strings.Contains(l.Error, "presence_penalty") {
		t.Fatalf("%d, access line %+v", resp.StatusCode, l)
	}
	waitInflightZero(t, gw.srv)
}

// The sample is a fraction of requests; requests the server failed (5xx)
// are logged whenever the access log is on.
func TestAccessLogSample(t *testing.T) {
	r := &httpx.Request{Method: "POST", Path: "/v1/completions", RemoteAddr: "127.0.0.1:1"}
	count := func(o *Observer, log accessLog, n, status int) int {
		before := len(log.lines(t))
		for range n {
			w := &httpx.ResponseWriter{}
			o.end(w, o.begin(w, r, "id", time.Now()), status)
		}
		return len(log.lines(t)) - before
	}
	half, halfLog := newAccessObserver(0.5)
	if n := count(half, halfLog, 400, 200); n < 100 || n > 300 {
		t.Fatalf("sample 0.5 logged %d of 400 requests", n)
	}
	rare, rareLog := newAccessObserver(math.SmallestNonzeroFloat64)
	if n := count(rare, rareLog, 50, 200); n != 0 {
		t.Fatalf("a near-zero sample logged %d of 50 requests", n)
	}
	if n := count(rare, rareLog, 5, 503); n != 5 {
		t.Fatalf("%d of 5 requests answered 503 logged", n)
	}
	off, offLog := newAccessObserver(0)
	if n := count(off, offLog, 5, 503); n != 0 {
		t.Fatalf("the access log off logged %d requests", n)
	}
	for _, o := range []*Observer{half, rare} {
		o.inflight.Range(func(k, _ any) bool { t.Fatalf("exchange of %p left in flight", k); return false })
	}
}

// With nothing to record, observing a request allocates nothing: the
// hooks on the request path are nil checks.
func TestObserveOffAllocatesNothing(t *testing.T) {
	r := &httpx.Request{Method: "POST", Path: "/v1/completions", RemoteAddr: "127.0.0.1:1"}
	w := &httpx.ResponseWriter{}
	var gen wire.Generate
	for _, o := range []*Observer{nil, {Policy: route.PolicyKV}} {
		allocs := testing.AllocsPerRun(1000, func() {
			x := o.begin(w, r, "id", time.Now())
			x = o.parsed(w, nil)
			x.tokenized(x.now(), 10, nil)
			x.routed(x.now(), nil, nil)
			a := x.startAttempt(&gen, nil)
			a.firstToken(3)
			a.end(200, false, nil, 4)
			o.end(w, x, 200)
		})
		if allocs != 0 {
			t.Fatalf("observer %+v: %v allocations per request", o, allocs)
		}
	}
}
