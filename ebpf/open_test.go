package ebpf

import (
	"bytes"
	"log/slog"
	"testing"
)

// TestOpenAuto: auto picks the first mode of Preference that works here
// and says so in the log; each mode opens (sockmap after its feature
// checks and self-test: CI runs as root on this kernel; elsewhere the
// sockmap subtest skips).
func TestOpenAuto(t *testing.T) {
	var logs bytes.Buffer
	s, err := Open("auto", slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Mode() != Preference[0] || !bytes.Contains(logs.Bytes(), []byte(`"mode":"`+string(Preference[0])+`"`)) {
		t.Fatalf("auto chose %s; log %s", s.Mode(), logs.String())
	}
	for _, m := range []string{"sockmap", "splice", "copy"} {
		t.Run(m, func(t *testing.T) {
			if m == "sockmap" {
				requireSockmap(t)
			}
			s, err := Open(m, nil)
			if err != nil || string(s.Mode()) != m {
				t.Fatalf("%s: %v", m, err)
			}
			s.Close()
		})
	}
	if _, err := Open("teleport", nil); err == nil {
		t.Fatal("an unknown mode opened")
	}
}
