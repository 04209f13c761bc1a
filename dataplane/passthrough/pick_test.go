package passthrough

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kvgate/kvgate/dataplane/route"
	"github.com/kvgate/kvgate/ebpf"
	"github.com/kvgate/kvgate/kvstore"
)

// modelsEngine is an HTTP engine that only lists model m.
func modelsEngine(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
	}))
	t.Cleanup(s.Close)
	return s
}

// healthyPool is a pool of the engines at urls, each polled once.
func healthyPool(t *testing.T, urls ...string) *Pool {
	p, err := NewPool(urls, ebpf.NewCopy(), route.DefaultWeights(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPickSpreadsNearTies: two equal engines and sequential requests with
// new prompts (each done before the next, so no load tells the engines
// apart) are near-ties every time, and both get a fair share, as on the
// wire path; a repeated prompt still sticks to the engine that had it;
// the in-flight counts come back to zero.
func TestPickSpreadsNearTies(t *testing.T) {
	a, b := modelsEngine(t), modelsEngine(t)
	p := healthyPool(t, a.URL, b.URL)
	rng := rand.New(rand.NewPCG(1, 2))
	prompt := func() []uint32 {
		tokens := make([]uint32, 512)
		for i := range tokens {
			tokens[i] = uint32(rng.IntN(150000))
		}
		return tokens
	}
	pick := func(tokens []uint32) *Engine {
		t.Helper()
		e, release, err := p.pick("m", tokens, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.InflightRequests() != 1 || e.InflightPrefill() < 0 {
			t.Fatalf("in flight on %s: %d requests, %d prefill tokens", e.URL, e.InflightRequests(), e.InflightPrefill())
		}
		release()
		release() // once only
		return e
	}
	const n = 200
	share := map[*Engine]int{}
	for range n {
		share[pick(prompt())]++
	}
	for _, e := range p.Engines {
		// Binomial(200, 1/2): below 60 is more than 5 standard deviations off.
		if share[e] < 60 {
			t.Fatalf("%s got %d of %d new prompts, want a fair share (%v)", e.URL, share[e], n, share)
		}
	}
	repeated := prompt()
	first := pick(repeated)
	for i := range 30 {
		if e := pick(repeated); e != first {
			t.Fatalf("repeat %d went to %s, the prompt is on %s", i, e.URL, first.URL)
		}
	}
	for _, e := range p.Engines {
		if e.InflightRequests() != 0 || e.InflightPrefill() != 0 {
			t.Fatalf("%s: %d requests, %d prefill tokens in flight after all were released", e.URL, e.InflightRequests(), e.InflightPrefill())
		}
	}
}

// TestPickHashesImages: the blocks a pick records carry the prompt's
// image keys, so the same text with another image matches only the
// blocks before the image, and the same image matches the whole prompt.
func TestPickHashesImages(t *testing.T) {
	p := healthyPool(t, modelsEngine(t).URL)
	tokens := make([]uint32, 512)
	for i := range tokens {
		tokens[i] = uint32(i + 1)
	}
	image := func(key uint64) *kvstore.Keys {
		return &kvstore.Keys{MM: []kvstore.MMItem{{Offset: 256, Length: 64, Hash: key}}}
	}
	e, release, err := p.pick("m", tokens, image(1))
	if err != nil {
		t.Fatal(err)
	}
	release()
	h, err := p.hasher("m")
	if err != nil {
		t.Fatal(err)
	}
	depth := func(keys *kvstore.Keys) int {
		hs, err := h.Hash(nil, tokens, keys)
		if err != nil {
			t.Fatal(err)
		}
		m := make([]kvstore.Match, 1)
		p.index.Match(hs, []kvstore.Slot{e.slot}, m)
		return m[0].Depth()
	}
	if same, other, plain := depth(image(1)), depth(image(2)), depth(nil); same != 512/BlockSize || other != 256/BlockSize || plain != 256/BlockSize {
		t.Fatalf("recorded blocks matched: same image %d, other image %d, no image %d; want %d, %d, %d",
			same, other, plain, 512/BlockSize, 256/BlockSize, 256/BlockSize)
	}
}
