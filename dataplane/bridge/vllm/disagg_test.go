package vllm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// pd is a prefill and a decode vLLM (NIXL fakes) behind bridges of those
// roles, each with a router connection that announced DISAGG.
type pd struct {
	pf, df *vllmtest.Fake
	pe, de *vllm.Engine
	pc, dc *wire.Conn
}

func startPD(t *testing.T, keep time.Duration) *pd {
	t.Helper()
	var p pd
	p.pf = startNIXL(t, vllmtest.KVProducer, "vllm-p", keep)
	p.df = startNIXL(t, vllmtest.KVConsumer, "vllm-d", 0)
	p.df.ReadFrom(p.pf)
	p.pe, p.pc = startRoleBridge(t, p.pf.URL, wire.RolePrefill, wire.FeatureDisagg)
	p.de, p.dc = startRoleBridge(t, p.df.URL, wire.RoleDecode, wire.FeatureDisagg)
	return &p
}

func startNIXL(t *testing.T, role vllmtest.KVRole, id string, keep time.Duration) *vllmtest.Fake {
	t.Helper()
	f, err := vllmtest.Start("m", 4, 1000, vllmtest.Positional, vllmtest.WithNIXL(role, id, keep))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// startRoleBridge serves a bridge of role in front of url and dials it as
// a router announcing features.
func startRoleBridge(t *testing.T, url string, role wire.EngineRole, features wire.Feature) (*vllm.Engine, *wire.Conn) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	e := vllm.NewEngine(url, "m", nil, log)
	e.Disagg.Role = role
	b := vllm.NewBridge(e, vllm.NewTranslator(hasher(t), nil), 1, 100)
	srv := serve.New(serve.Config{Handshake: wire.Handshake{Role: wire.RoleEngine, ID: role.String(), BlockSize: 4, Models: []string{"m"},
		Features: role.Features() | e.Features()}, Logger: log}, b)
	e.Out = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, ln.Addr().String(), &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RoleRouter, ID: "r", Features: features}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.NetConn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if got := c.Peer.Features & (wire.FeatureDisagg | wire.FeaturePrefillOnly | wire.FeatureDecodeOnly); got != role.Features()&^wire.FeatureKVTransfer {
		t.Fatalf("role %v announced %#x", role, uint32(got))
	}
	return e, c
}

func handoff(prompt []uint32, maxTokens uint32, side wire.HandoffSide, peer string, params []byte) *wire.Generate {
	return &wire.Generate{RequestID: []byte("req"), Model: []byte("m"), MaxTokens: maxTokens, DPRank: wire.AnyRank,
		Flags: wire.GenHandoff | wire.GenHasSeed, Seed: 7, Temperature: 0.8, TopP: 1, Prompt: wire.TokensOf(prompt), KVTransfer: params,
		Handoff: wire.Handoff{Side: side, DeadlineMillis: 60_000, Peer: []byte(peer)}}
}

// streamEnd is a stream read to its end.
type streamEnd struct {
	frames   []wire.TokensMsg // copies, but for Logprobs
	tokens   []uint32
	logprobs []float32 // each token's, as the frames carried them
	err      *wire.Error
}

func (s *streamEnd) last() wire.TokensMsg { return s.frames[len(s.frames)-1] }

func (s streamEnd) String() string {
	if s.err != nil {
		return fmt.Sprintf("tokens %v, ERROR %v %q", s.tokens, s.err.Code, s.err.Message)
	}
	return fmt.Sprintf("tokens %v, frames %+v", s.tokens, s.frames)
}

// readFrame reads stream's next TOKENS (copied) or ERROR.
func readFrame(t *testing.T, c *wire.Conn, stream uint32) (*wire.TokensMsg, *wire.Error) {
	t.Helper()
	f := next(t, c, stream)
	if f.Type == wire.TypeError {
		var e wire.Error
		if err := wire.DecodeFrame(f, &e, nil); err != nil {
			t.Fatal(err)
		}
		return nil, &e
	}
	var m wire.TokensMsg
	if err := wire.DecodeFrame(f, &m, nil); err != nil {
		t.Fatal(err)
	}
	m.Tokens = wire.TokensOf(m.Tokens.AppendTo(nil))
	m.KVTransfer = append([]byte(nil), m.KVTransfer...)
	return &m, nil
}

// readDisagg reads stream to its LAST frame or ERROR.
func readDisagg(t *testing.T, c *wire.Conn, stream uint32) streamEnd {
	t.Helper()
	var s streamEnd
	for {
		m, e := readFrame(t, c, stream)
		if e != nil {
			s.err = e
			return s
		}
		s.frames = append(s.frames, *m)
		s.tokens = m.Tokens.AppendTo(s.tokens)
		for i := range m.Logprobs.Len() { // a view: read before the next frame
			s.logprobs = append(s.logprobs, m.Logprobs.Logprob(i))
		}
		if m.Last() {
			return s
		}
	}
}

// prefillHandoff runs the prefill side of prompt and returns its hand-off.
func (p *pd) prefillHandoff(t *testing.T, stream uint32, prompt []uint32, maxTokens uint32) wire.TokensMsg {
	t.Helper()
	if err := p.pc.Send(stream, handoff(prompt, maxTokens, wire.HandoffPrefill, "decode", nil)); err != nil {
		t.Fatal(err)
	}
	m, e := readFrame(t, p.pc, stream)
	if e != nil {
		t.Fatalf("prefill: %v %s", e.Code, e.Message)
	}
	if m.Flags&wire.TokHandoff == 0 || !m.First() || m.Last() || m.Tokens.Len() != 1 {
		t.Fatalf("prefill answered %+v, want a hand-off of one token", m)
	}
	return *m
}

// TestDisaggThroughVLLM: a request split as vLLM's toy proxy splits it.
// The prefill vLLM gets one token, not streamed, the proxy's
// kv_transfer_params; the hand-off frame carries its first token and the
// params it returned, verbatim; the decode vLLM gets the original prompt
// and max_tokens with exactly those params, and the bridge streams its
// tokens after the first: the stream an aggregated vLLM would give, with
// the decode side's usage. The decode instance read the KV (the prefill
// freed it) and holds the prompt's blocks; CANCEL ends the prefill side.
func TestDisaggThroughVLLM(t *testing.T) {
	p := startPD(t, 0)
	prompt := []uint32{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	want := vllmtest.Generated(prompt, 6) // the aggregated answer
	h := p.prefillHandoff(t, 1, prompt, 6)
	if h.Tokens.At(0) != want[0] {
		t.Fatalf("first token %d, want %d", h.Tokens.At(0), want[0])
	}
	var params map[string]any
	if err := json.Unmarshal(h.KVTransfer, &params); err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{"do_remote_decode", "do_remote_prefill", "remote_block_ids", "remote_engine_id", "remote_host", "remote_port", "remote_request_id", "tp_size"}
	if got := slices.Sorted(maps.Keys(params)); !slices.Equal(got, wantKeys) || params["do_remote_prefill"] != true || params["remote_engine_id"] != "vllm-p" {
		t.Fatalf("kv_transfer %s", h.KVTransfer)
	}
	pb := p.pf.Requests()[0].Body
	if pb["stream"] != false || pb["max_tokens"] != float64(1) || pb["seed"] != float64(7) || pb["request_id"] != "req" {
		t.Fatalf("prefill request %v", pb)
	}
	if _, ok := pb["stream_options"]; ok {
		t.Fatalf("prefill request with stream_options: %v", pb)
	}
	if p.pf.Held() != 1 {
		t.Fatalf("prefill holds %d requests' blocks, want 1", p.pf.Held())
	}

	dprompt := append(slices.Clone(prompt), h.Tokens.At(0))
	if err := p.dc.Send(1, handoff(dprompt, 5, wire.HandoffDecode, "prefill", h.KVTransfer)); err != nil {
		t.Fatal(err)
	}
	s := readDisagg(t, p.dc, 1)
	if s.err != nil {
		t.Fatalf("decode: %v %s", s.err.Code, s.err.Message)
	}
	if !slices.Equal(s.tokens, want[1:]) || !s.frames[0].First() {
		t.Fatalf("decode streamed %v, want %v", s.tokens, want[1:])
	}
	if l := s.last(); l.Finish != wire.FinishLength || l.PromptTokens != uint32(len(dprompt)) || l.CompletionTokens != 5 {
		t.Fatalf("last frame %+v", l)
	}
	db := p.df.Requests()[0].Body
	var sent map[string]any
	_ = json.Unmarshal(h.KVTransfer, &sent)
	if !reflect.DeepEqual(db["kv_transfer_params"], sent) || db["max_tokens"] != float64(6) || db["stream"] != true || len(p.df.Requests()) != 1 {
		t.Fatalf("decode request %v, want the prefill's params %v", db, sent)
	}
	if got := p.df.Requests()[0].Prompt; !slices.Equal(got, prompt) {
		t.Fatalf("decode prompt %v, want the prefill's %v", got, prompt)
	}
	if p.pf.Held() != 0 || p.df.Reads() != 1 {
		t.Fatalf("after the decode: prefill holds %d, decode read %d", p.pf.Held(), p.df.Reads())
	}
	for i, hash := range p.df.BlockHashes(prompt) {
		if !p.df.Cached(hash) {
			t.Fatalf("decode instance lacks block %d of the transferred prompt", i)
		}
	}
	if err := p.pc.Send(1, &wire.Cancel{Reason: wire.CancelRerouted}); err != nil {
		t.Fatal(err)
	}
	end := readDisagg(t, p.pc, 1)
	if end.err != nil || end.last().Finish != wire.FinishCancelled || end.last().CompletionTokens != 1 || end.last().PromptTokens != uint32(len(prompt)) {
		t.Fatalf("prefill after CANCEL: %+v", end)
	}
	if p.pe.Disagg.Handoffs.Load() != 1 || p.de.Disagg.Mismatches.Load() != 0 {
		t.Fatalf("handoffs %d, mismatches %d", p.pe.Disagg.Handoffs.Load(), p.de.Disagg.Mismatches.Load())
	}
}

// TestDisaggFirstTokenMismatch: a decode vLLM that samples another first
// token (unseeded sampling) is stopped before anything reaches the
// router; the bridge counts it and continues from the prefill's token
// with an ordinary request of the GENERATE as sent, so the stream holds
// the tokens after the prefill's, none twice, none missing.
func TestDisaggFirstTokenMismatch(t *testing.T) {
	p := startPD(t, 0)
	p.df.SetNIXLFault(vllmtest.NIXLFault{SampleOther: true})
	prompt := []uint32{5, 6, 7, 8, 9, 10, 11}
	h := p.prefillHandoff(t, 1, prompt, 4)
	dprompt := append(slices.Clone(prompt), h.Tokens.At(0))
	if err := p.dc.Send(1, handoff(dprompt, 3, wire.HandoffDecode, "prefill", h.KVTransfer)); err != nil {
		t.Fatal(err)
	}
	s := readDisagg(t, p.dc, 1)
	if want := vllmtest.Generated(dprompt, 3); s.err != nil || !slices.Equal(s.tokens, want) || !s.frames[0].First() {
		t.Fatalf("decode streamed %v (%v), want the continuation %v", s.tokens, s.err, want)
	}
	if l := s.last(); l.PromptTokens != uint32(len(dprompt)) || l.CompletionTokens != 3 {
		t.Fatalf("last frame %+v", l)
	}
	reqs := p.df.Requests()
	if len(reqs) != 2 || !slices.Equal(reqs[1].Prompt, dprompt) || reqs[1].Body["max_tokens"] != float64(3) {
		t.Fatalf("decode instance got %d requests, the second %v", len(reqs), reqs[len(reqs)-1])
	}
	if _, ok := reqs[1].Body["kv_transfer_params"]; ok {
		t.Fatal("the continuation carries kv_transfer_params")
	}
	if p.de.Disagg.Mismatches.Load() != 1 {
		t.Fatalf("mismatches %d, want 1", p.de.Disagg.Mismatches.Load())
	}
}

// TestDisaggLogprobs: asked for logprobs, the hand-off frame carries the
// first token's, from the prefill vLLM's non-streamed answer, and the
// decode side each later token's, the dropped first token's left out.
func TestDisaggLogprobs(t *testing.T) {
	p := startPD(t, 0)
	prompt := []uint32{31, 32, 33, 34, 35}
	withLogprobs := func(g *wire.Generate) *wire.Generate {
		g.Flags |= wire.GenSampling
		g.Sampling = wire.Sampling{RepetitionPenalty: 1, Flags: wire.SampleLogprobs, TopLogprobs: 2}
		return g
	}
	if err := p.pc.Send(1, withLogprobs(handoff(prompt, 5, wire.HandoffPrefill, "decode", nil))); err != nil {
		t.Fatal(err)
	}
	h, e := readFrame(t, p.pc, 1)
	if e != nil || h.Flags&wire.TokHandoff == 0 || h.Flags&wire.TokLogprobs == 0 || h.Logprobs.Len() != 1 ||
		h.Logprobs.TopN() != 2 || h.Logprobs.Logprob(0) != vllmtest.FakeLogprob(0) {
		t.Fatalf("hand-off %+v (%v), want one token with its logprobs", h, e)
	}
	if pb := p.pf.Requests()[0].Body; pb["logprobs"] != float64(2) || pb["return_tokens_as_token_ids"] != true {
		t.Fatalf("prefill request %v", pb)
	}
	dprompt := append(slices.Clone(prompt), h.Tokens.At(0))
	if err := p.dc.Send(1, withLogprobs(handoff(dprompt, 4, wire.HandoffDecode, "prefill", h.KVTransfer))); err != nil {
		t.Fatal(err)
	}
	s := readDisagg(t, p.dc, 1)
	if s.err != nil || len(s.tokens) != 4 || len(s.logprobs) != 4 || !slices.Equal(s.tokens, vllmtest.Generated(prompt, 5)[1:]) {
		t.Fatalf("decode %v, logprobs %v", s, s.logprobs)
	}
	for i, lp := range s.logprobs {
		if lp != vllmtest.FakeLogprob(0) {
			t.Fatalf("token %d's logprob %v", i, lp)
		}
	}
}
