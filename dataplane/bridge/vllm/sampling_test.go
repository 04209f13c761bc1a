package vllm_test

import (
	"reflect"
	"testing"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/wire"
)

// TestSamplingReachesVLLM: GENERATE's sampling section reaches vLLM's
// /v1/completions under vLLM's names, and the logprobs vLLM streams (keyed
// token_id:<id>) come back in TOKENS' logprobs section, most likely first.
func TestSamplingReachesVLLM(t *testing.T) {
	f, err := vllmtest.Start("m", 4, 100, vllmtest.Tagged)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	_, _, httpAddr := f.Addrs()
	b, c := startBridge(t, "http://"+httpAddr)
	if b.Features()&wire.FeatureSampling == 0 {
		t.Fatal("the vLLM mode does not announce FeatureSampling")
	}
	prompt := []uint32{1, 2, 3, 4, 5}
	g := &wire.Generate{RequestID: []byte("r1"), Model: []byte("m"), MaxTokens: 3, TopP: 1, DPRank: wire.AnyRank,
		Flags: wire.GenSampling, Prompt: wire.TokensOf(prompt),
		Sampling: wire.Sampling{PresencePenalty: 0.5, FrequencyPenalty: -0.25, RepetitionPenalty: 1.5, MinTokens: 2,
			Flags: wire.SampleLogprobs, TopLogprobs: 2, LogitBias: wire.LogitBiasOf([]uint32{7, 50}, []float32{-100, 2.5})}}
	if err := c.Send(1, g); err != nil {
		t.Fatal(err)
	}
	var tokens []uint32
	var lps []wire.LogprobEntry
	for {
		fr := next(t, c, 1)
		if fr.Type != wire.TypeTokens {
			t.Fatalf("stream 1: %s", fr.Type)
		}
		var m wire.TokensMsg
		if err := wire.DecodeFrame(fr, &m, nil); err != nil {
			t.Fatal(err)
		}
		if m.Tokens.Len() > 0 && m.Flags&wire.TokLogprobs == 0 {
			t.Fatalf("a frame of tokens without logprobs: %+v", m)
		}
		tokens = m.Tokens.AppendTo(tokens)
		lps = append(lps, m.Logprobs.Entries()...)
		if m.Last() {
			break
		}
	}
	want := vllmtest.Generated(prompt, 3)
	if !reflect.DeepEqual(tokens, want) || len(lps) != 3 {
		t.Fatalf("tokens %v (want %v), %d logprobs", tokens, want, len(lps))
	}
	for i, lp := range lps {
		wantTop := []wire.Alt{{Token: want[i], Logprob: vllmtest.FakeLogprob(0)}, {Token: want[i] + 1, Logprob: vllmtest.FakeLogprob(1)}}
		if lp.Logprob != vllmtest.FakeLogprob(0) || !reflect.DeepEqual(lp.Top, wantTop) {
			t.Fatalf("token %d: %+v, want top %v", i, lp, wantTop)
		}
	}
	body := f.Requests()[0].Body
	wantBody := map[string]any{"presence_penalty": 0.5, "frequency_penalty": -0.25, "repetition_penalty": 1.5,
		"min_tokens": 2.0, "logprobs": 2.0, "return_tokens_as_token_ids": true,
		"logit_bias": map[string]any{"7": -100.0, "50": 2.5}}
	for k, v := range wantBody {
		if !reflect.DeepEqual(body[k], v) {
			t.Fatalf("body %s = %v, want %v (body %v)", k, body[k], v, body)
		}
	}

	// Without the section, none of the fields is sent.
	plain := *g
	plain.Flags, plain.RequestID = 0, []byte("r2")
	if err := c.Send(3, &plain); err != nil {
		t.Fatal(err)
	}
	if r := readStream(t, c, 3); r.err != nil || r.last.Flags&wire.TokLogprobs != 0 {
		t.Fatalf("plain request: %+v", r)
	}
	body = f.Requests()[1].Body
	for k := range wantBody {
		if _, ok := body[k]; ok {
			t.Fatalf("a GENERATE without the sampling section sent %s: %v", k, body)
		}
	}
}
