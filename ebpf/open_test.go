package ebpf

import (
	"bytes"
	"log/slog"
	"testing"
)

// TestOpenAuto: on this kernel (CI runs as root on it) auto picks sockmap,
// after its feature checks and self-test, and says so in the log.
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
	for _, m := range []string{"splice", "copy"} {
		s, err := Open(m, nil)
		if err != nil || string(s.Mode()) != m {
			t.Fatalf("%s: %v", m, err)
		}
		s.Close()
	}
	if _, err := Open("teleport", nil); err == nil {
		t.Fatal("an unknown mode opened")
	}
}
