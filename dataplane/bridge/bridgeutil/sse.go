package bridgeutil

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

// An engine streams a completion as server-sent events: each event a
// data line and a blank line; other fields (event:, id:, comment lines
// such as llama.cpp's ":" pings) carry nothing the bridge reads:
//
//	data: {...}\n
//	\n
//	: ping\n
//	\n
//	data: [DONE]\n
//
// SSE dispatches an event at its line end, so a last line the stream ends
// in the middle of is no event: the engine stopped mid-event.

// MaxSSELine bounds one line of a stream, a chunk's JSON: a longer one ends
// the stream with bufio.ErrTooLong rather than growing the buffer.
const MaxSSELine = 16 << 20

// ReadSSE hands fn the data of each data line of r, in order, until fn
// returns false (ReadSSE returns nil) or the stream ends: then it returns
// the read error, or io.ErrUnexpectedEOF when r simply ended. cut is true
// for a last line that ran into the end of r without its line end; fn
// decides whether such data counts (vLLM's "[DONE]" does: nothing can
// follow it). data is valid only during the call.
func ReadSSE(r io.Reader, fn func(data []byte, cut bool) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxSSELine)
	cut := false // the line just scanned ran into EOF without its line end
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		n, line, err := bufio.ScanLines(data, atEOF)
		cut = atEOF && line != nil && bytes.IndexByte(data, '\n') < 0
		return n, line, err
	})
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		if !fn(bytes.TrimSpace(line[5:]), cut) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// MaxEngineMessage bounds the part of an engine's error message passed on
// to the router: an ERROR frame holds at most 64 KiB of message, and one
// that does not fit is not sent at all, leaving the router waiting.
const MaxEngineMessage = 4096

// EngineMessage is an engine's error message as a stream's ERROR says it:
// cut to MaxEngineMessage bytes of valid UTF-8, and never empty.
func EngineMessage(m string) string {
	if len(m) > MaxEngineMessage {
		m = strings.ToValidUTF8(m[:MaxEngineMessage], "")
	}
	if m == "" {
		return "an error event without a message"
	}
	return m
}
