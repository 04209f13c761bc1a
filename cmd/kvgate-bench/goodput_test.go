package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoodputCommand: goodput runs aggregated and each split in each mode
// at each load, prints a line for each and writes the plot with every
// series in it; a split without decode engines is refused.
func TestGoodputCommand(t *testing.T) {
	const spec = "shared-prefix:groups=20,prefix=2048,suffix=512,n=80,rate=20,output=16,seed=5"
	dir := t.TempDir()
	var out bytes.Buffer
	if rc := run([]string{"goodput", "--workload", spec, "--engines", "4", "--gpu-blocks", "2048", "--splits", "2",
		"--loads", "1,2", "--out", dir}, &out, io.Discard); rc != 0 {
		t.Fatalf("goodput: exit %d\n%s", rc, out.String())
	}
	series := []string{"4 aggregated", "2:2 conditional", "2:2 conditional + TPOT rule", "2:2 always"}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2*len(series) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 2*len(series), out.String())
	}
	svg, err := os.ReadFile(filepath.Join(dir, "goodput.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range series {
		if !strings.Contains(lines[i], name+" ") || !strings.Contains(lines[len(series)+i], "x2") || !strings.Contains(string(svg), ">"+name+"<") {
			t.Errorf("series %q: line %q, in the plot %v", name, lines[i], strings.Contains(string(svg), ">"+name+"<"))
		}
	}
	again := t.TempDir()
	if rc := run([]string{"goodput", "--replot", filepath.Join(dir, "goodput.json"), "--out", again}, io.Discard, io.Discard); rc != 0 {
		t.Fatalf("--replot: exit %d", rc)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "README.md"))
	if md2, err := os.ReadFile(filepath.Join(again, "README.md")); err != nil || string(md2) != string(md) || !strings.Contains(string(md), " of 2:2 conditional |") {
		t.Fatalf("--replot wrote %v:\n%s\nthe sweep:\n%s", err, md2, md)
	}
	if rc := run([]string{"goodput", "--workload", spec, "--engines", "4", "--splits", "4"}, io.Discard, io.Discard); rc == 0 {
		t.Fatal("a 4:0 split accepted")
	}
}
