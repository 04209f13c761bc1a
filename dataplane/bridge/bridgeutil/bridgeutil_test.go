package bridgeutil

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/kvgate/kvgate/wire"
	"github.com/kvgate/kvgate/wire/serve"
)

// TestReadSSE: data lines in order, other fields skipped, CRLF taken, a
// last line without its line end handed over as cut, the end of the
// stream reported as io.ErrUnexpectedEOF and a read error as itself.
func TestReadSSE(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string
		err      error
	}{
		{"events", "data: a\n\n: ping\n\nevent: x\ndata:b\r\n\r\n", []string{"a", "b"}, io.ErrUnexpectedEOF},
		{"cut", "data: a\n\ndata: {\"half", []string{"a", `{"half cut`}, io.ErrUnexpectedEOF},
		{"stop", "data: a\n\ndata: stop\n\ndata: c\n\n", []string{"a", "stop"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			err := ReadSSE(iotest.OneByteReader(strings.NewReader(c.in)), func(data []byte, cut bool) bool {
				s := string(data)
				if cut {
					s += " cut"
				}
				got = append(got, s)
				return s != "stop"
			})
			if fmt.Sprint(got) != fmt.Sprint(c.want) || !errors.Is(err, c.err) {
				t.Fatalf("got %q, %v; want %q, %v", got, err, c.want, c.err)
			}
		})
	}
	boom := errors.New("boom")
	if err := ReadSSE(iotest.ErrReader(boom), func([]byte, bool) bool { return true }); !errors.Is(err, boom) {
		t.Fatalf("read error: %v", err)
	}
}

// TestEngineMessage: cut to what an ERROR frame carries, valid UTF-8,
// never empty.
func TestEngineMessage(t *testing.T) {
	if m := EngineMessage(strings.Repeat("é", 5000)); len(m) > MaxEngineMessage || !strings.HasPrefix(m, "éé") || strings.ContainsRune(m, '\uFFFD') {
		t.Fatalf("long message cut to %d bytes", len(m))
	}
	if EngineMessage("") == "" {
		t.Fatal("empty message passed on empty")
	}
}

// TestRequests: Cancel reaches the request's context, Done forgets it,
// Idle says whether any is left.
func TestRequests(t *testing.T) {
	var r Requests
	k := serve.Key{Conn: 1, Stream: 3}
	if !r.Idle() {
		t.Fatal("zero table not idle")
	}
	ctx := r.Start(k)
	if r.Idle() {
		t.Fatal("idle with a request")
	}
	r.Cancel(serve.Key{Conn: 2, Stream: 3}) // another router's stream: no effect
	if ctx.Err() != nil {
		t.Fatal("cancelled by another key")
	}
	r.Cancel(k)
	if ctx.Err() == nil {
		t.Fatal("Cancel did not reach the context")
	}
	r.Done(k)
	if !r.Idle() {
		t.Fatal("not idle after Done")
	}
}

// TestCodeOfStatus maps the statuses a router acts on.
func TestCodeOfStatus(t *testing.T) {
	for status, want := range map[int]wire.ErrorCode{
		http.StatusNotFound: wire.CodeUnknownModel, http.StatusTooManyRequests: wire.CodeOverloaded,
		http.StatusServiceUnavailable: wire.CodeOverloaded, http.StatusBadRequest: wire.CodeBadRequest,
		http.StatusInternalServerError: wire.CodeStreamFailed,
	} {
		if got := CodeOfStatus(status); got != want {
			t.Errorf("%d: %v, want %v", status, got, want)
		}
	}
}

// TestSnapshotFrames: chunks of at most SnapshotChunk events, numbered,
// the last marked; an empty rank still gets its one last frame.
func TestSnapshotFrames(t *testing.T) {
	for _, n := range []int{0, 1, SnapshotChunk, SnapshotChunk + 1} {
		frames := SnapshotFrames(9, 4, 1, make([]wire.Event, n))
		total := 0
		for i, f := range frames {
			s := f.(*wire.Snapshot)
			if s.Chunk != uint32(i) || s.Last != (i == len(frames)-1) || s.SnapshotID != 9 || s.Seq != 4 || s.DPRank != 1 || len(s.Events) > SnapshotChunk {
				t.Fatalf("%d events: frame %d %+v", n, i, s)
			}
			total += len(s.Events)
		}
		if total != n || len(frames) != max(1, (n+SnapshotChunk-1)/SnapshotChunk) {
			t.Fatalf("%d events in %d frames holding %d", n, len(frames), total)
		}
	}
}

// TestSplitSample reads names, labels (commas inside quotes kept) and
// values, and refuses what is no sample.
func TestSplitSample(t *testing.T) {
	name, labels, v, ok := SplitSample(`vllm:cache_config_info{block_size="16",prefix="a,b"} 1.0 1712345678`)
	if !ok || name != "vllm:cache_config_info" || labels["prefix"] != "a,b" || labels["block_size"] != "16" || v != 1 {
		t.Fatalf("%q %v %v %v", name, labels, v, ok)
	}
	if name, _, v, ok := SplitSample("llamacpp:requests_deferred 3"); !ok || name != "llamacpp:requests_deferred" || v != 3 {
		t.Fatalf("%q %v %v", name, v, ok)
	}
	for _, bad := range []string{"", "# HELP x y", "x", `x{a="b" 1`, "x NaNa"} {
		if _, _, _, ok := SplitSample(bad); ok {
			t.Errorf("%q read as a sample", bad)
		}
	}
	for v, want := range map[float64]uint32{-1: 0, 7.9: 7, 1e12: 1<<32 - 1} {
		if Count(v) != want {
			t.Errorf("Count(%v) = %d", v, Count(v))
		}
	}
}
