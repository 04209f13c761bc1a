// Command kvgate is the KV-cache-aware router daemon: it terminates OpenAI and
// Anthropic HTTP, tokenizes prompts once, and routes each request to the
// engine that will start it soonest.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if err == errHelp {
			return 0
		}
		fmt.Fprintln(stderr, "kvgate:", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	if cfg.checkOnly {
		if _, err := loadTokenizers(cfg); err != nil {
			fmt.Fprintln(stderr, "kvgate:", err)
			return 2
		}
		fmt.Fprintln(stderr, "kvgate: configuration is valid")
		return 0
	}
	// Catch signals before start announces the address: whoever reads that
	// log line may send SIGTERM at once.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	d, err := start(cfg, log)
	if err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	select {
	case sig := <-sigs:
		log.Info("draining", "signal", sig.String(), "deadline", cfg.drainTimeout)
	case err := <-d.served:
		if err != nil {
			log.Error("HTTP server stopped", "err", err)
			d.close()
			return 1
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.drainTimeout)
	defer cancel()
	err = d.shutdown(ctx)
	if err != nil {
		log.Warn("drain cut short", "err", err)
	}
	log.Info("stopped")
	return 0
}
