package ebpf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"

	cebpf "github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
)

// Preference is the order Open tries modes in when asked for "auto":
// fastest first, as measured in perf/RESULTS.md (BenchmarkSteer on
// loopback): splice matches sockmap on large bodies and is 4x faster on
// SSE streams of small events, where the kernel's per-skb redirect costs
// more than it saves; copy costs twice the proxy CPU of splice.
//
// Sockmap is left out: besides being slower, on Linux 6.18 it sometimes
// hands one segment of a response to the verdict program twice while the
// client is paused (0-4% of looped TestSlowClient runs, varying with
// timing). The steerer catches that and abandons the response
// (ErrDuplicated) rather than corrupt it, but a cut response is still a
// failed request. It is used only when asked for by name.
var Preference = []Mode{ModeSplice, ModeCopy}

// Modes are all the steering modes.
var Modes = []Mode{ModeSplice, ModeSockmap, ModeCopy}

// Open returns a steerer for mode ("sockmap", "splice", "copy"), or for
// "auto" the first of Preference that the running kernel supports and that
// passes a self-test. It logs which mode runs and why.
func Open(mode string, log *slog.Logger) (Steerer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if mode != "" && mode != "auto" {
		s, err := openMode(Mode(mode))
		if err != nil {
			return nil, err
		}
		if err := SelfTest(s); err != nil {
			s.Close()
			return nil, fmt.Errorf("ebpf: %s steering failed its self-test: %w", mode, err)
		}
		log.Info("steering", "mode", mode, "why", "asked for")
		return s, nil
	}
	var why []string
	for _, m := range Preference {
		s, err := openMode(m)
		if err == nil {
			if err = SelfTest(s); err != nil {
				s.Close()
			}
		}
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", m, err))
			continue
		}
		log.Info("steering", "mode", string(m), "why", "fastest mode this kernel supports that passed its self-test", "skipped", why)
		return s, nil
	}
	return nil, fmt.Errorf("ebpf: no steering mode works: %v", why)
}

func openMode(m Mode) (Steerer, error) {
	switch m {
	case ModeSockmap:
		if err := SockmapSupported(); err != nil {
			return nil, err
		}
		return NewSockmap()
	case ModeSplice:
		return NewSplice(), nil
	case ModeCopy:
		return NewCopy(), nil
	}
	return nil, fmt.Errorf("ebpf: unknown steering mode %q (sockmap, splice, copy, auto)", m)
}

// SockmapSupported checks the map types, program type and helpers the
// sockmap mode needs.
func SockmapSupported() error {
	var errs []error
	for _, mt := range []cebpf.MapType{cebpf.SockHash, cebpf.RingBuf, cebpf.Hash} {
		if err := features.HaveMapType(mt); err != nil {
			errs = append(errs, fmt.Errorf("map type %s: %w", mt, err))
		}
	}
	if err := features.HaveProgramType(cebpf.SkSKB); err != nil {
		errs = append(errs, fmt.Errorf("program type sk_skb: %w", err))
	} else {
		for _, fn := range []asm.BuiltinFunc{asm.FnGetSocketCookie, asm.FnSkRedirectHash, asm.FnRingbufOutput, asm.FnMapLookupElem} {
			if err := features.HaveProgramHelper(cebpf.SkSKB, fn); err != nil {
				errs = append(errs, fmt.Errorf("helper %s: %w", fn, err))
			}
		}
	}
	return errors.Join(errs...)
}

// SelfTest steers a 1 MB response on loopback and checks every byte.
func SelfTest(s Steerer) error {
	const size = 1 << 20
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i * 31 / 7)
	}
	head := []byte("HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(size) + "\r\n\r\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() { // the upstream: answers one request
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := c.Read(make([]byte, 64)); err == nil {
			_, _ = c.Write(append(append([]byte(nil), head...), want...))
		}
	}()
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer cl.Close()
	client, err := net.Dial("tcp", cl.Addr().String())
	if err != nil {
		return err
	}
	defer client.Close()
	served, err := cl.Accept()
	if err != nil {
		return err
	}
	defer served.Close()
	upc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	defer upc.Close()
	deadline := time.Now().Add(10 * time.Second)
	_ = client.SetDeadline(deadline)
	_ = upc.SetDeadline(deadline)
	p, err := s.Prepare(upc.(*net.TCPConn), served.(*net.TCPConn))
	if err != nil {
		return err
	}
	defer p.Release()
	got := make(chan error, 1)
	go func() {
		b := make([]byte, len(head)+size)
		_, err := io.ReadFull(client, b)
		if err == nil && (!bytes.Equal(b[:len(head)], head) || !bytes.Equal(b[len(head):], want)) {
			err = errors.New("bytes changed on the way")
		}
		got <- err
	}()
	if _, err := upc.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
		return err
	}
	var read []byte
	buf := make([]byte, 256)
	for !bytes.Contains(read, []byte("\r\n\r\n")) {
		n, err := p.Read(buf)
		if err != nil {
			return err
		}
		read = append(read, buf[:n]...)
	}
	if _, err := served.Write(read); err != nil {
		return err
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if _, err := p.Steer(ctx, int64(len(read)), int64(len(head)+size)); err != nil {
		return err
	}
	return <-got
}
