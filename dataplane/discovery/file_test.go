package discovery

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseEngineList(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
		err      string
	}{
		{"lines, comments, blanks, duplicates", "# engines\n10.0.0.2:7000\n\n  10.0.0.1:7000  \n10.0.0.2:7000\n[fd00::1]:7000\n",
			[]string{"10.0.0.1:7000", "10.0.0.2:7000", "[fd00::1]:7000"}, ""},
		{"empty", "", nil, ""},
		{"no port", "10.0.0.1:7000\nengine-1\n", nil, "line 2"},
		{"port out of range", "engine-0:70000\n", nil, "line 1"},
		{"no host", ":7000\n", nil, "line 1"},
	} {
		got, err := ParseEngineList([]byte(tc.in), "f")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestFileWatch: the file's set is reported at once and after each
// change; a bad line or a missing file keeps the last set.
func TestFileWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "engines")
	write := func(s string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("a:1\n")
	f := &File{Path: path, Every: time.Millisecond}
	got := make(chan []string, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Watch(ctx, func(a []string) { got <- a }) }()
	defer func() { cancel(); <-done }()
	next := func(want ...string) {
		t.Helper()
		select {
		case a := <-got:
			if !slices.Equal(a, want) {
				t.Fatalf("reported %v, want %v", a, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing reported; want %v", want)
		}
	}
	quiet := func(what string) {
		t.Helper()
		select {
		case a := <-got:
			t.Fatalf("%s reported %v", what, a)
		case <-time.After(50 * time.Millisecond):
		}
	}
	next("a:1")
	write("a:1\nb:2\n")
	next("a:1", "b:2")
	write("a:1\nnot an address\n")
	quiet("a bad line")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	quiet("a missing file")
	write("# none\n")
	next()
}
