//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binary builds every command once per test run and returns the path of one.
func binary(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "kvgate-e2e-bin")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/", "github.com/kvgate/kvgate/cmd/...")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, name)
}

// proc is a running binary whose JSON log lines are watched.
type proc struct {
	cmd   *exec.Cmd
	lines chan map[string]any
	done  chan error
}

// start runs a binary; it is killed when the test ends if still running.
func start(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t, name), args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan map[string]any, 1024), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				select {
				case p.lines <- m:
				default: // nobody is watching: drop
				}
			} else {
				t.Logf("%s: %s", name, sc.Text())
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitLog returns the first log line whose msg contains substr.
func (p *proc) waitLog(t testing.TB, substr string) map[string]any {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case m := <-p.lines:
			if msg, _ := m["msg"].(string); strings.Contains(msg, substr) {
				return m
			}
		case err := <-p.done:
			p.done <- err
			t.Fatalf("process exited (%v) before logging %q", err, substr)
		case <-timeout:
			t.Fatalf("no log line %q within a minute", substr)
		}
	}
}

// wait returns the process's exit error within a minute.
func (p *proc) wait(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-ctx.Done():
		t.Fatal("process did not exit within a minute")
		return nil
	}
}
