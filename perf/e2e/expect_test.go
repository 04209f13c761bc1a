//go:build e2e

package e2e

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// TestExpectContinue: a client that sends Expect: 100-continue gets the
// interim response before it sends the body, then the real answer.
func TestExpectContinue(t *testing.T) {
	_, base := startKvgate(t, "--sim-engines", "1", "--sim-profile", "zero")
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	body := `{"prompt":"hello there"}`
	if _, err := c.Write([]byte("POST /tokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("want 100 Continue first, got %q %v", line, err)
	}
	if blank, _ := rd.ReadString('\n'); blank != "\r\n" {
		t.Fatalf("interim response not terminated: %q", blank)
	}
	if _, err := c.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	line, err = rd.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("final response %q %v", line, err)
	}
}
