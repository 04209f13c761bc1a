//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStatusPage loads the admin listener's status page in a real headless
// browser (Debian's chromium): it shows every engine of a kvgate with
// simulated engines, its script polls status.json again and again, and
// what it shows moves: the samples taken grow between two loads, a
// request's cached blocks appear in the chart, and a prompt sent twice
// shows in its engine's hit rate.
func TestStatusPage(t *testing.T) {
	browser := requireChromium(t)
	_, base := startKvgate(t, "--sim-engines", "3", "--sim-profile", "zero")
	admin := adminOf(t, base)
	var state struct {
		Engines []struct {
			Addr  string `json:"addr"`
			State string `json:"state"`
		} `json:"engines"`
	}
	getJSON(t, admin+"/debug/state", &state)
	if len(state.Engines) != 3 {
		t.Fatalf("/debug/state lists %d engines, want 3", len(state.Engines))
	}
	var first statusDOM
	checkFor(t, 2*time.Minute, 100*time.Millisecond, func() error {
		dom, err := dumpDOM(browser, admin+"/status")
		if err != nil {
			return err
		}
		if first, err = parseStatusDOM(dom); err != nil {
			return err
		}
		for _, e := range state.Engines {
			if !strings.Contains(dom, `<tr data-engine="`+e.Addr+`"><td>`+e.Addr+`</td>`) {
				return fmt.Errorf("the page shows no row for engine %s", e.Addr)
			}
		}
		if first.rows != 3 || first.ready != 3 {
			return fmt.Errorf("the page shows %d engine rows, %d ready; want 3, 3", first.rows, first.ready)
		}
		if first.polls < 2 {
			return fmt.Errorf("the page polled status.json %d times within its time budget, want 2 or more", first.polls)
		}
		return nil
	})
	// A request leaves blocks in an engine's cache: the chart's maximum of
	// GPU blocks comes off zero, and more samples have been taken.
	// The same prompt again is served from that engine's cache: its hit
	// rate comes off zero.
	for range 2 {
		resp, body := post(t, base+"/v1/completions", map[string]any{"model": model, "prompt": strings.Repeat("status page ", 64),
			"max_tokens": 4, "ignore_eos": true})
		if resp.StatusCode != 200 {
			t.Fatalf("completion: %d %s", resp.StatusCode, body)
		}
	}
	checkFor(t, 2*time.Minute, 200*time.Millisecond, func() error {
		dom, err := dumpDOM(browser, admin+"/status")
		if err != nil {
			return err
		}
		later, err := parseStatusDOM(dom)
		if err != nil {
			return err
		}
		if later.taken <= first.taken {
			return fmt.Errorf("samples taken %d, then %d: the page did not move", first.taken, later.taken)
		}
		if later.maxBlocks == 0 {
			return errors.New("the chart shows no GPU blocks cached after a request")
		}
		if later.bestHitRate <= 0 {
			return fmt.Errorf("no engine shows a hit rate above 0%% after the same prompt twice (best %v%%)", later.bestHitRate)
		}
		if later.points != later.chartSamples {
			return fmt.Errorf("the chart draws %d points for %d samples", later.points, later.chartSamples)
		}
		return nil
	})
}

// TestStatusPageRing: the status page of a replica in a ring shows the
// ring (its members, the engines shared) and its peer.
func TestStatusPageRing(t *testing.T) {
	browser := requireChromium(t)
	var engines []string
	for i := range 2 {
		e := start(t, "kvgate-sim", "--listen", "127.0.0.1:0", "--id", fmt.Sprintf("e%d", i), "--model", model, "--profile", "zero")
		engines = append(engines, e.waitLog(t, "serving")["addr"].(string))
	}
	ring := freeLoopbackAddrs(t, 2)
	var bases []string
	for i := range 2 {
		_, base := startKvgate(t, "--engine", strings.Join(engines, ","), "--replica-id", fmt.Sprintf("replica-%d", i),
			"--ring-listen", ring[i], "--peers", strings.Join(ring, ","))
		bases = append(bases, base)
	}
	admin := adminOf(t, bases[0])
	waitMetric(t, admin, "kvgate_ring_members ", " 2")
	checkFor(t, 2*time.Minute, 100*time.Millisecond, func() error {
		dom, err := dumpDOM(browser, admin+"/status")
		if err != nil {
			return err
		}
		for _, want := range []string{"replica replica-0, epoch ", "2 members (replica-0, replica-1), 2 engines, 2 shared by every member",
			`<tr data-peer="replica-1"><td>replica-1</td><td>yes</td><td>yes</td>`} {
			if !strings.Contains(dom, want) {
				return fmt.Errorf("the page lacks %q", want)
			}
		}
		return nil
	})
}

// statusDOM is what the test reads of a dumped status page.
type statusDOM struct {
	rows, ready                    int // engine rows, and those in state ready
	polls                          int // status.json fetches the page's script made
	taken, chartSamples, maxBlocks int
	points                         int     // points of the chart's requests line
	bestHitRate                    float64 // the highest engine hit rate shown, percent (-1: none)
}

var (
	reBodyPolls = regexp.MustCompile(`<body data-polls="(\d+)"`)
	reTaken     = regexp.MustCompile(`id="samples-taken">(\d+)<`)
	reChartN    = regexp.MustCompile(`id="chart-samples">(\d+)<`)
	reMaxBlocks = regexp.MustCompile(`id="max-blocks">(\d+)<`)
	rePoints    = regexp.MustCompile(`id="line-requests"[^>]* points="([^"]*)"`)
	reHitRate   = regexp.MustCompile(`<td>(\d+\.\d)%</td></tr>`)
)

func parseStatusDOM(dom string) (statusDOM, error) {
	var s statusDOM
	for _, f := range []struct {
		re  *regexp.Regexp
		dst *int
	}{{reBodyPolls, &s.polls}, {reTaken, &s.taken}, {reChartN, &s.chartSamples}, {reMaxBlocks, &s.maxBlocks}} {
		m := f.re.FindStringSubmatch(dom)
		if m == nil {
			return s, fmt.Errorf("the page lacks %s", f.re)
		}
		*f.dst, _ = strconv.Atoi(m[1])
	}
	if m := rePoints.FindStringSubmatch(dom); m != nil {
		s.points = len(strings.Fields(m[1]))
	}
	s.bestHitRate = -1
	for _, m := range reHitRate.FindAllStringSubmatch(dom, -1) {
		if v, err := strconv.ParseFloat(m[1], 64); err == nil && v > s.bestHitRate {
			s.bestHitRate = v
		}
	}
	s.rows = strings.Count(dom, "<tr data-engine=")
	s.ready = strings.Count(dom, `<td class="ready">ready</td>`)
	return s, nil
}

// requireChromium returns the chromium binary; without one the test skips,
// or fails where $KVGATE_REQUIRE_CHROMIUM=1 (CI installs it).
func requireChromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err == nil {
		return path
	}
	if os.Getenv("KVGATE_REQUIRE_CHROMIUM") == "1" {
		t.Fatalf("KVGATE_REQUIRE_CHROMIUM=1 and no chromium: %v", err)
	}
	t.Skipf("no chromium (apt-get install chromium): %v", err)
	return ""
}

// dumpDOM loads url in a fresh headless chromium profile, lets its scripts
// run for five seconds of virtual time (the page's timers; the browser
// waits for its fetches), and returns the DOM then.
func dumpDOM(browser, url string) (string, error) {
	profile, err := os.MkdirTemp("", "kvgate-chromium")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir="+profile,
		"--virtual-time-budget=5000", "--dump-dom", url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("chromium: %v\n%s", err, stderr.String())
	}
	return string(out), nil
}

func getJSON(t *testing.T, url string, into any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
}
