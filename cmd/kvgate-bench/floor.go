package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/kvgate/kvgate/perf/floor"
)

// cmdFloor runs the floor proxy (perf/floor) until interrupted: what
// gnet and netpoll reach per request with nothing of kvgate's work.
func cmdFloor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg floor.Config
	var mode, bodyFile string
	workers := 0
	fs.StringVar(&cfg.Addr, "listen", "127.0.0.1:8080", "HTTP listen address")
	fs.StringVar(&mode, "mode", "loop", "loop: a request runs on the event loop and the upstream's read loop; worker: on a pooled handler goroutine, as kvgate's gateway")
	fs.IntVar(&cfg.Upstreams, "upstreams", 4, "connections to the in-process upstream")
	fs.IntVar(&cfg.Loops, "event-loops", 0, "gnet event loops (0: one per CPU)")
	fs.IntVar(&workers, "workers", 64, "handler goroutines (--mode worker)")
	fs.StringVar(&bodyFile, "body", "", "file whose bytes are every answer's body (default: a small JSON completion)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Mode = floor.Mode(mode)
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	cfg.Body = []byte(`{"id":"cmpl-1","object":"text_completion","created":0,"model":"floor","choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}}`)
	if bodyFile != "" {
		b, err := os.ReadFile(bodyFile)
		if err != nil {
			return err
		}
		cfg.Body = b
	}
	p, err := floor.New(cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	if cfg.Mode == floor.ModeWorker {
		p.Handle(workers)
	}
	errc := make(chan error, 1)
	go func() { errc <- p.Serve() }()
	select {
	case <-p.Booted():
		fmt.Fprintf(stdout, "floor proxy (%s) on %s\n", mode, cfg.Addr)
	case err := <-errc:
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}
