package engine

import (
	"bytes"
	"encoding/json"
	"log"
	"log/slog"
	"strings"
	"testing"
)

func TestSlogLines(t *testing.T) {
	var out bytes.Buffer
	std := log.New(slogLines{slog.New(slog.NewJSONHandler(&out, nil))}, "", log.LstdFlags)
	std.Printf("NETPOLL: netFD close failed: %v", "bad fd")
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("%q: %v", out.String(), err)
	}
	if m["msg"] != "NETPOLL: netFD close failed: bad fd" || m["component"] != "netpoll" || m["level"] != "WARN" {
		t.Fatalf("%v", m)
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("one line wanted: %q", out.String())
	}
}
