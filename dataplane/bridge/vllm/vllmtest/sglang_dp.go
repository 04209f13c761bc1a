package vllmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// SGLangDP is a fake SGLang server with DP attention over several ranks
// (--enable-dp-attention --dp-size N): one fake SGLang per rank, each its
// own radix cache and its own publisher, rank r's on the events port + r
// and its replay socket on the replay port + r, as offset_endpoint_port
// places them, behind one HTTP API: /generate goes to the rank its
// data_parallel_rank names (round robin without one), /metrics has every
// rank's gauges under its dp_rank, /get_server_info says dp_size N.
type SGLangDP struct {
	Ranks     []*Fake
	URL       string // http://host:port of the server
	EventsURL string // rank 0's PUB socket; rank r's is on its port + r
	ReplayURL string // rank 0's ROUTER socket, likewise

	http *http.Server
	next atomic.Uint32
}

// withRank makes a fake rank r of a server with n DP-attention ranks.
func withRank(r, n int) Option {
	return func(o *options) { o.rank, o.dpSize = r, n }
}

// StartSGLangDP runs a fake SGLang with ranks DP-attention ranks of
// capacity pages of pageSize tokens each, on loopback ports.
func StartSGLangDP(model string, pageSize, capacity, ranks int, opts ...Option) (*SGLangDP, error) {
	var err error
	for range 20 { // consecutive ports for each socket: retry where one is taken
		var s *SGLangDP
		if s, err = startSGLangDP(model, pageSize, capacity, ranks, opts); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func startSGLangDP(model string, pageSize, capacity, ranks int, opts []Option) (*SGLangDP, error) {
	// Rank r publishes on events+r and answers replays on replay+r: one run
	// of 2 x ranks ports, so that no rank's port is another socket's (two
	// ports picked apart are often neighbours, and rank 1's events port
	// would be rank 0's replay port on every try).
	events := freePort()
	replay := events + ranks
	s := &SGLangDP{}
	for r := range ranks {
		o := append(append([]Option(nil), opts...), withRank(r, ranks),
			WithAddrs(fmt.Sprintf("127.0.0.1:%d", events+r), fmt.Sprintf("127.0.0.1:%d", replay+r), ""))
		f, err := Start(model, pageSize, capacity, SGLang, o...)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.Ranks = append(s.Ranks, f)
	}
	s.EventsURL, s.ReplayURL = s.Ranks[0].EventsURL, s.Ranks[0].ReplayURL
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		return nil, err
	}
	s.URL = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /generate", s.generate)
	mux.HandleFunc("GET /get_server_info", s.Ranks[0].serverInfo)
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { writeSGLangMetrics(w, s.Ranks) })
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(ln) }()
	return s, nil
}

// freePort is a loopback port free a moment ago.
func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// generate hands the request to its rank.
func (s *SGLangDP) generate(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(r)
	if err != nil {
		sglangError(w, http.StatusBadRequest, err.Error())
		return
	}
	var req struct {
		Rank *int `json:"data_parallel_rank"`
	}
	_ = json.Unmarshal(b, &req)
	rank := int(s.next.Add(1)-1) % len(s.Ranks)
	if req.Rank != nil {
		if *req.Rank < 0 || *req.Rank >= len(s.Ranks) {
			sglangError(w, http.StatusBadRequest, fmt.Sprintf("data_parallel_rank must be in range [0, %d)", len(s.Ranks)))
			return
		}
		rank = *req.Rank
	}
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(b))
	s.Ranks[rank].generate(w, r2)
}

// Close stops the server and its ranks.
func (s *SGLangDP) Close() {
	if s.http != nil {
		_ = s.http.Close()
	}
	for _, f := range s.Ranks {
		f.Close()
	}
}
