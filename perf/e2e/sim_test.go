//go:build e2e

package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/kvgate/kvgate/wire"
)

// TestSimProcess runs kvgate-sim as a process: a router streams a completion
// from it, and SIGTERM drains it with GOAWAY and exit status 0.
func TestSimProcess(t *testing.T) {
	p := start(t, "kvgate-sim", "--listen", "127.0.0.1:0", "--profile", "default", "--speed", "10", "--gpu-blocks", "1024")
	addr := p.waitLog(t, "serving")["addr"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := wire.Dial(ctx, addr, &wire.HandshakeConfig{Local: wire.Handshake{Role: wire.RoleRouter, ID: "e2e"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prompt := make([]uint32, 300)
	g := &wire.Generate{Model: []byte("kvgate/sim"), MaxTokens: 8, TopP: 1, Flags: wire.GenIgnoreEOS, DPRank: wire.AnyRank, Prompt: wire.TokensOf(prompt)}
	if err := c.Send(1, g); err != nil {
		t.Fatal(err)
	}
	tokens := 0
	for done := false; !done; {
		f, err := c.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != wire.TypeTokens {
			continue
		}
		var m wire.TokensMsg
		if err := wire.DecodeFrame(f, &m, nil); err != nil {
			t.Fatal(err)
		}
		tokens += m.Tokens.Len()
		done = m.Last()
	}
	if tokens != 8 {
		t.Fatalf("%d tokens, want 8", tokens)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := c.ReadFrame()
		if err != nil {
			t.Fatalf("connection ended without GOAWAY: %v", err)
		}
		if f.Type == wire.TypeGoaway {
			break
		}
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}
