package syncring

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden ring messages in testdata/")

// goldenMessages are ring format 2's messages as RING.md draws them, one of
// each kind, hex in testdata/ring_v2.golden (go test -run Golden -update).
func goldenMessages() []struct {
	name string
	body []byte
} {
	hb := heartbeat{Incarnation: 1700000000000000000, Engines: engineSetHash([]string{"engine-a", "engine-b"}),
		EpochNum: 3, RoundsDone: 10, RoundsAbandoned: 1, RoundMicros: 250, RoundBytes: 96, ViewTokens: 4096,
		Hears: []string{"r1"}, EngineKeys: []string{"engine-a", "engine-b"}}
	ch := chunk{Round: 7, Phase: phaseAllGather, Step: 1, Index: 2, Values: []int64{5, -3, 0}}
	res := reserveBatch{Tag: 42, Items: []reservation{{Engine: 1, Load: Load{PrefillTokens: 512, Requests: 1}}}}
	return []struct {
		name string
		body []byte
	}{
		{"heartbeat", appendHeartbeat(nil, 0x0102030405060708, &hb)},
		{"chunk", appendChunk(nil, 9, &ch, []int64{4, -3, 1})},
		{"reserve", appendReserve(nil, 9, &res)},
		{"digest", appendDigest(nil, 9, []byte{0xde, 0xad})},
	}
}

// TestGoldenRingMessages: the encoders produce the vectors byte for byte,
// and every vector decodes (a chunk against the same base).
func TestGoldenRingMessages(t *testing.T) {
	var out bytes.Buffer
	for _, g := range goldenMessages() {
		fmt.Fprintf(&out, "%s %s\n", g.name, hex.EncodeToString(g.body))
		var m message
		if err := decodeMessage(g.body, &m, func(*chunk, int) []int64 { return []int64{4, -3, 1} }); err != nil {
			t.Errorf("%s: %v", g.name, err)
		}
	}
	path := filepath.Join("testdata", "ring_v2.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		for i, l := range strings.Split(got, "\n") {
			if w := strings.Split(string(want), "\n"); i >= len(w) || w[i] != l {
				t.Errorf("vector %d differs:\n got %s\nwant %s", i, l, w[min(i, len(w)-1)])
			}
		}
	}
}
