package media

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func newTestFetcher(t *testing.T, mod func(*FetchOptions)) *Fetcher {
	t.Helper()
	o := Defaults()
	o.AllowHosts, o.AllowPrivate = []string{"127.0.0.1"}, true
	if mod != nil {
		mod(&o)
	}
	f, err := NewFetcher(o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestFetch(t *testing.T) {
	img := testImage(t, PNG, 10, 10, 1)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/img.png", http.StatusFound) // same host: followed
			return
		}
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(img)
	})
	f := newTestFetcher(t, nil)
	for _, path := range []string{"/img.png", "/moved"} {
		b, ct, err := f.Fetch(context.Background(), srv.URL+path)
		if err != nil || string(b) != string(img) || ct != "image/png" {
			t.Fatalf("%s: %d bytes, %q, %v", path, len(b), ct, err)
		}
	}
}

func TestFetchRefusesOtherHostRedirect(t *testing.T) {
	target := serve(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("secret")) })
	u, _ := url.Parse(target.URL)
	other := "http://localhost:" + u.Port() + "/" // another name for the same machine
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, other, http.StatusFound) })
	f := newTestFetcher(t, func(o *FetchOptions) { o.AllowHosts = []string{"127.0.0.1", "localhost"} })
	_, _, err := f.Fetch(context.Background(), srv.URL+"/img.png")
	if !errors.Is(err, ErrFetch) || !strings.Contains(err.Error(), "another host") {
		t.Fatalf("redirect to another host: %v", err)
	}
}

func TestFetchRefusesOversizedBodyMidRead(t *testing.T) {
	sent := make(chan int, 1)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		n := 0
		chunk := make([]byte, 64<<10)
		for n < 1<<28 { // no Content-Length: the limit must cut the read; more than socket buffers hold
			if _, err := w.Write(chunk); err != nil {
				break
			}
			w.(http.Flusher).Flush()
			n += len(chunk)
		}
		sent <- n
	})
	f := newTestFetcher(t, func(o *FetchOptions) { o.MaxBytes = 10000 })
	if _, _, err := f.Fetch(context.Background(), srv.URL+"/big"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized body: %v", err)
	}
	if n := <-sent; n >= 1<<28 {
		t.Fatalf("the server wrote all %d bytes: the read was not cut", n)
	}
}

func TestFetchRefusesDeclaredOversize(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "20000")
		_, _ = w.Write(make([]byte, 20000))
	})
	f := newTestFetcher(t, func(o *FetchOptions) { o.MaxBytes = 10000 })
	if _, _, err := f.Fetch(context.Background(), srv.URL+"/big"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Content-Length over the limit: %v", err)
	}
}

func TestFetchTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select { // never answers within the timeout
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	f := newTestFetcher(t, func(o *FetchOptions) { o.Timeout = 200 * time.Millisecond })
	start := time.Now()
	_, _, err := f.Fetch(context.Background(), srv.URL+"/slow")
	if !errors.Is(err, ErrFetch) {
		t.Fatalf("slow server: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the timeout did not bound the fetch: %v", d)
	}
}

func TestFetchRefusesLoopbackUnlessAllowed(t *testing.T) {
	var hits atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, _ *http.Request) { hits.Add(1); _, _ = w.Write([]byte("internal")) })
	u, _ := url.Parse(srv.URL)
	// localhost is refused by the address it resolves to, at dial time:
	// the allowed name does not vouch for the address.
	for _, host := range []string{"127.0.0.1", "localhost"} {
		f := newTestFetcher(t, func(o *FetchOptions) { o.AllowHosts, o.AllowPrivate = []string{host}, false })
		_, _, err := f.Fetch(context.Background(), "http://"+host+":"+u.Port()+"/")
		if !errors.Is(err, ErrPrivateAddress) {
			t.Fatalf("%s without --media-allow-private: %v", host, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server was reached %d times", n)
	}
	f := newTestFetcher(t, nil)
	if _, _, err := f.Fetch(context.Background(), srv.URL+"/"); err != nil {
		t.Fatalf("with --media-allow-private: %v", err)
	}
}

func TestFetchRefusesHostsAndSchemes(t *testing.T) {
	f := newTestFetcher(t, nil)
	off, _ := NewFetcher(Defaults())
	cases := []struct {
		f    *Fetcher
		url  string
		want error
	}{
		{f, "http://img.example/a.png", ErrHostNotAllowed},
		{f, "https://127.0.0.1.evil.example/a.png", ErrHostNotAllowed},
		{f, "ftp://127.0.0.1/a.png", ErrSource},
		{f, "http://user:pw@127.0.0.1/a.png", ErrSource},
		{off, "http://127.0.0.1/a.png", ErrHostNotAllowed},
	}
	for _, c := range cases {
		if _, _, err := c.f.Fetch(context.Background(), c.url); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.url, err, c.want)
		}
	}
}

func TestIsPrivate(t *testing.T) {
	for addr, private := range map[string]bool{"127.0.0.1": true, "10.1.2.3": true, "172.16.0.1": true, "192.168.1.1": true,
		"169.254.169.254": true, "100.64.0.1": true, "0.0.0.0": true, "224.0.0.1": true, "::1": true, "fe80::1": true,
		"fd00::1": true, "::ffff:127.0.0.1": true, "ff02::1": true, "8.8.8.8": false, "1.1.1.1": false, "2606:4700::1111": false} {
		if got := IsPrivate(netip.MustParseAddr(addr)); got != private {
			t.Errorf("IsPrivate(%s) = %v", addr, got)
		}
	}
}

func TestFetchOptionsValidate(t *testing.T) {
	for _, h := range []string{"https://img.example", "img.example:443", "img.example/x", ""} {
		o := Defaults()
		o.AllowHosts = []string{h}
		if o.Validate() == nil {
			t.Errorf("host %q accepted", h)
		}
	}
	o := Defaults()
	o.AllowHosts = []string{"img.example", "10.0.0.1", "::1"}
	if err := o.Validate(); err != nil {
		t.Error(err)
	}
}
