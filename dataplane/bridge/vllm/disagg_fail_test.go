package vllm_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm/vllmtest"
	"github.com/kvgate/kvgate/wire"
)

// TestDisaggFailures: what goes wrong on either vLLM ends the stream with
// an ERROR the gateway acts on (gateway/disagg.go: before the hand-off it
// fails or re-routes the request, after it the client's stream ends with
// an in-stream error), and what vLLM keeps nothing for ends it at once.
func TestDisaggFailures(t *testing.T) {
	prompt := []uint32{21, 22, 23, 24, 25, 26}
	t.Run("prefill vLLM fails", func(t *testing.T) {
		p := startPD(t, 0)
		p.pf.SetNIXLFault(vllmtest.NIXLFault{Status: 500})
		if err := p.pc.Send(1, handoff(prompt, 4, wire.HandoffPrefill, "decode", nil)); err != nil {
			t.Fatal(err)
		}
		if s := readDisagg(t, p.pc, 1); s.err == nil || s.err.Code != wire.CodeStreamFailed || len(s.frames) != 0 {
			t.Fatalf("prefill stream %v, want ERROR STREAM_FAILED", s)
		}
	})
	t.Run("decode vLLM refuses the params", func(t *testing.T) {
		p := startPD(t, 0)
		h := p.prefillHandoff(t, 1, prompt, 4)
		for i, params := range [][]byte{
			bytes.Replace(h.KVTransfer, []byte(`"tp_size":1`), []byte(`"tp_size":1,"extra":1`), 1), // a field too many
			bytes.Replace(h.KVTransfer, []byte(`"do_remote_prefill":true,`), nil, 1),               // one missing
		} {
			if bytes.Equal(params, h.KVTransfer) {
				t.Fatalf("case %d: params %s not changed", i, params)
			}
			dprompt := append(slices.Clone(prompt), h.Tokens.At(0))
			stream := uint32(2*i + 1)
			if err := p.dc.Send(stream, handoff(dprompt, 3, wire.HandoffDecode, "prefill", params)); err != nil {
				t.Fatal(err)
			}
			if s := readDisagg(t, p.dc, stream); s.err == nil || s.err.Code != wire.CodeBadRequest || !strings.Contains(s.err.Message, "kv_transfer_params") {
				t.Fatalf("case %d: decode stream %v, want ERROR BAD_REQUEST naming kv_transfer_params", i, s)
			}
		}
		if p.pf.Held() != 1 {
			t.Fatalf("prefill holds %d after refused reads, want 1", p.pf.Held())
		}
	})
	t.Run("decode vLLM dies mid-stream", func(t *testing.T) {
		p := startPD(t, 0)
		p.df.SetNIXLFault(vllmtest.NIXLFault{DieAfter: 3})
		h := p.prefillHandoff(t, 1, prompt, 8)
		dprompt := append(slices.Clone(prompt), h.Tokens.At(0))
		if err := p.dc.Send(1, handoff(dprompt, 7, wire.HandoffDecode, "prefill", h.KVTransfer)); err != nil {
			t.Fatal(err)
		}
		s := readDisagg(t, p.dc, 1)
		if want := vllmtest.Generated(prompt, 3)[1:]; s.err == nil || s.err.Code != wire.CodeStreamFailed || !slices.Equal(s.tokens, want) {
			t.Fatalf("decode stream %v, want %v then ERROR STREAM_FAILED", s, want)
		}
	})
	t.Run("KV never arrives", func(t *testing.T) {
		p := startPD(t, 0)
		p.df.SetNIXLFault(vllmtest.NIXLFault{Stall: true})
		h := p.prefillHandoff(t, 1, prompt, 4)
		g := handoff(append(slices.Clone(prompt), h.Tokens.At(0)), 3, wire.HandoffDecode, "prefill-7", h.KVTransfer)
		g.Handoff.DeadlineMillis = 50
		if err := p.dc.Send(1, g); err != nil {
			t.Fatal(err)
		}
		if s := readDisagg(t, p.dc, 1); s.err == nil || s.err.Code != wire.CodeStreamFailed || !strings.Contains(s.err.Message, "prefill-7") || len(s.tokens) != 0 {
			t.Fatalf("decode stream %v, want ERROR STREAM_FAILED naming the prefill engine", s)
		}
	})
	t.Run("first token stops the request", func(t *testing.T) {
		p := startPD(t, 0)
		g := handoff(prompt, 4, wire.HandoffPrefill, "decode", nil)
		g.StopTokens = wire.TokensOf(vllmtest.Generated(prompt, 1))
		if err := p.pc.Send(1, g); err != nil {
			t.Fatal(err)
		}
		s := readDisagg(t, p.pc, 1)
		if s.err != nil || len(s.frames) != 1 || s.frames[0].Flags&wire.TokHandoff != 0 || !s.frames[0].First() || s.last().Finish != wire.FinishStop {
			t.Fatalf("prefill stream %v, want one FIRST|LAST frame, finish stop", s)
		}
		if p.pf.Held() != 0 {
			t.Fatalf("prefill holds %d", p.pf.Held())
		}
	})
	t.Run("hand-off not released", func(t *testing.T) {
		p := startPD(t, 0)
		p.pe.Disagg.KeepTimeout = 10 * time.Millisecond // vLLM's timeout, shorter than the router's deadline
		p.prefillHandoff(t, 1, prompt, 4)
		if s := readDisagg(t, p.pc, 1); s.err != nil || s.last().Finish != wire.FinishAbort || s.last().CompletionTokens != 1 {
			t.Fatalf("kept stream ended %v, want LAST finish abort", s)
		}
	})
}

// TestDisaggRefusals: each role takes only its side, and only from a
// router that announced DISAGG; refusals name why.
func TestDisaggRefusals(t *testing.T) {
	prompt := []uint32{1, 2, 3, 4, 5}
	p := startPD(t, 0)
	plain := handoff(prompt, 4, wire.HandoffPrefill, "decode", nil)
	plain.Flags &^= wire.GenHandoff
	_, noDisagg := startRoleBridge(t, p.pf.URL, wire.RolePrefill, 0)
	for _, c := range []struct {
		name string
		conn *wire.Conn
		g    *wire.Generate
		want string
	}{
		{"ordinary to prefill", p.pc, plain, "only prefill-side"},
		{"decode side to prefill", p.pc, handoff(prompt, 4, wire.HandoffDecode, "p", []byte(`{}`)), "no decode side"},
		{"prefill side to decode", p.dc, handoff(prompt, 4, wire.HandoffPrefill, "d", nil), "no prefill side"},
		{"params not an object", p.dc, handoff(prompt, 4, wire.HandoffDecode, "p", []byte(`[1]`)), "JSON object"},
		{"router without DISAGG", noDisagg, handoff(prompt, 4, wire.HandoffPrefill, "d", nil), "DISAGG"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.conn.Send(9, c.g); err != nil {
				t.Fatal(err)
			}
			s := readDisagg(t, c.conn, 9)
			if s.err == nil || s.err.Code != wire.CodeBadRequest || !strings.Contains(s.err.Message, c.want) {
				t.Fatalf("%v, want BAD_REQUEST naming %q", s, c.want)
			}
		})
	}
	if n := len(p.pf.Requests()) + len(p.df.Requests()); n != 0 {
		t.Fatalf("%d refused requests reached vLLM", n)
	}
}
