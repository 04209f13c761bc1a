package httpx

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// streamChunk is chunk i of streamed response r: sizes from 1 byte to
// past half of MaxPendingWrite (a chunk the writer paces in pieces).
func streamChunk(r, i int) string {
	if i == 500 {
		return strings.Repeat(strconv.Itoa(r%10), 600<<10)
	}
	return fmt.Sprintf("r%d-c%d:%s;", r, i, strings.Repeat("x", (i*37)%300))
}

const streamChunks = 1000

// TestStreamBytesInOrder: 16 connections, each with three streamed
// requests pipelined at once, get exactly the bytes their handlers
// chunked, in order, each response's end before the next one's head,
// however the loop grouped the chunks into writes.
func TestStreamBytesInOrder(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxPendingWrite = 1 << 20 // more than the small chunks of all three responses
	s := serveT(t, cfg, handlerFunc(func(w *ResponseWriter, r *Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.Path, "/"))
		if err := w.Stream(200); err != nil {
			return
		}
		for i := range streamChunks {
			if err := w.Chunk([]byte(streamChunk(n, i))); err != nil {
				return
			}
		}
		_ = w.Finish()
	}))
	var want strings.Builder
	for r := range 3 {
		want.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
		for i := range streamChunks {
			c := streamChunk(r, i)
			want.WriteString(strconv.FormatInt(int64(len(c)), 16) + "\r\n" + c + "\r\n")
		}
		want.WriteString("0\r\n\r\n")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		c := dialT(t, s)
		wg.Go(func() {
			if _, err := io.WriteString(c, get("/0")+get("/1")+get("/2")); err != nil {
				errs <- err
				return
			}
			got := make([]byte, want.Len())
			if _, err := io.ReadFull(c, got); err != nil {
				errs <- err
				return
			}
			if string(got) != want.String() {
				at := 0
				for at < len(got) && got[at] == want.String()[at] {
					at++
				}
				errs <- fmt.Errorf("bytes differ from %d: %.80q, want %.80q", at, got[at:], want.String()[at:])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitIdle(t, s)
}

// TestStreamToClientNotReadingIsCut: a streamed response to a client that
// reads nothing is cut off once MaxPendingWrite piles up (the kernel's
// buffers fill first): the handler's Chunk fails with ErrClientGone and
// the request ends.
func TestStreamToClientNotReadingIsCut(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxPendingWrite, cfg.SocketSendBuffer = 64<<10, 16<<10
	got := make(chan error, 1)
	s := serveT(t, cfg, handlerFunc(func(w *ResponseWriter, r *Request) {
		err := w.Stream(200)
		for chunk := make([]byte, 1<<10); err == nil; {
			err = w.Chunk(chunk)
		}
		got <- err
		_ = w.Finish()
	}))
	c := dialT(t, s)
	if _, err := io.WriteString(c, get("/")); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrClientGone) {
		t.Fatalf("Chunk failed with %v, want ErrClientGone", err)
	}
	waitIdle(t, s)
}
