package media

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// FetchOptions configures URL fetching: kvgate's --media-allow-host,
// --media-max-bytes, --media-fetch-timeout and --media-allow-private.
type FetchOptions struct {
	// AllowHosts are the host names (or IP literals) URLs may name; none
	// turns fetching off. Compared without the port, case-insensitively.
	AllowHosts []string
	// MaxBytes bounds an image's bytes, fetched or carried inline.
	MaxBytes int64
	// Timeout bounds a whole fetch: dial, headers and body.
	Timeout time.Duration
	// AllowPrivate lets fetches dial private, loopback, link-local and
	// multicast addresses (an image server on the cluster network).
	AllowPrivate bool
	// MaxConcurrent bounds the fetches in flight; more wait their turn.
	MaxConcurrent int
}

// Defaults of FetchOptions.
const (
	DefaultMaxBytes      = 20 << 20
	DefaultFetchTimeout  = 10 * time.Second
	DefaultMaxConcurrent = 16
	maxRedirects         = 5
)

// Defaults is FetchOptions with fetching off and the default limits.
func Defaults() FetchOptions {
	return FetchOptions{MaxBytes: DefaultMaxBytes, Timeout: DefaultFetchTimeout, MaxConcurrent: DefaultMaxConcurrent}
}

// Validate refuses limits that cannot work and host entries that are
// not host names.
func (o *FetchOptions) Validate() error {
	if o.MaxBytes <= 0 || o.Timeout <= 0 || o.MaxConcurrent <= 0 {
		return fmt.Errorf("media: max bytes, fetch timeout and concurrency must be positive")
	}
	for _, h := range o.AllowHosts {
		if h == "" || strings.ContainsAny(h, "/:@ ") && net.ParseIP(h) == nil {
			return fmt.Errorf("media: allowed host %q is not a host name (no scheme, port or path)", h)
		}
	}
	return nil
}

// Fetcher fetches images from allowed hosts. Safe for concurrent use.
type Fetcher struct {
	opts   FetchOptions
	allow  map[string]bool
	client *http.Client
	slots  chan struct{}
}

// NewFetcher builds a Fetcher; with no allowed host every URL is refused.
func NewFetcher(o FetchOptions) (*Fetcher, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	f := &Fetcher{opts: o, allow: map[string]bool{}, slots: make(chan struct{}, o.MaxConcurrent)}
	for _, h := range o.AllowHosts {
		f.allow[strings.ToLower(strings.Trim(h, "[]"))] = true
	}
	dialer := &net.Dialer{Timeout: o.Timeout, Control: addressControl(o.AllowPrivate)}
	transport := &http.Transport{
		Proxy:                 nil, // a proxy would dial for us, past the address check
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   o.Timeout,
		ResponseHeaderTimeout: o.Timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
	}
	f.client = &http.Client{Transport: transport, CheckRedirect: f.checkRedirect}
	return f, nil
}

// Options are the options the Fetcher was built with.
func (f *Fetcher) Options() FetchOptions { return f.opts }

// Allowed reports whether a URL names an allowed host over http(s).
func (f *Fetcher) Allowed(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: %q is not an http(s) URL", ErrSource, raw)
	}
	if u.User != nil {
		return fmt.Errorf("%w: image URLs may not carry credentials", ErrSource)
	}
	if !f.allow[strings.ToLower(u.Hostname())] {
		if len(f.allow) == 0 {
			return fmt.Errorf("%w: image URLs are not fetched here (kvgate --media-allow-host allows hosts); send the image as base64", ErrHostNotAllowed)
		}
		return fmt.Errorf("%w: host %q is not among the hosts images are fetched from", ErrHostNotAllowed, u.Hostname())
	}
	return nil
}

func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("%w: more than %d redirects", ErrFetch, maxRedirects)
	}
	if !strings.EqualFold(req.URL.Hostname(), via[0].URL.Hostname()) {
		return fmt.Errorf("%w: redirect from %s to another host (%s) refused", ErrFetch, via[0].URL.Hostname(), req.URL.Hostname())
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w: redirect to a %s URL refused", ErrFetch, req.URL.Scheme)
	}
	return nil
}

// Fetch gets an image's bytes and the Content-Type the server gave,
// within the timeout and at most MaxBytes, read so that a larger body is
// refused as soon as it passes the limit.
func (f *Fetcher) Fetch(ctx context.Context, raw string) ([]byte, string, error) {
	if err := f.Allowed(raw); err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	select {
	case f.slots <- struct{}{}:
		defer func() { <-f.slots }()
	case <-ctx.Done():
		return nil, "", fmt.Errorf("%w: waiting for a fetch slot: %v", ErrFetch, ctx.Err())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrSource, err)
	}
	req.Header.Set("Accept", "image/*")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, "", fetchError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("%w: %s answered %s", ErrFetch, req.URL.Hostname(), resp.Status)
	}
	if resp.ContentLength > f.opts.MaxBytes {
		return nil, "", fmt.Errorf("%w: %d bytes, over the limit of %d", ErrTooLarge, resp.ContentLength, f.opts.MaxBytes)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.opts.MaxBytes+1))
	if err != nil {
		return nil, "", fetchError(err)
	}
	if int64(len(body)) > f.opts.MaxBytes {
		return nil, "", fmt.Errorf("%w: over the limit of %d bytes", ErrTooLarge, f.opts.MaxBytes)
	}
	return body, resp.Header.Get("Content-Type"), nil
}

// fetchError keeps this package's sentinels (a refused address, a
// refused redirect) visible through net/http's wrapping.
func fetchError(err error) error {
	for _, s := range []error{ErrPrivateAddress, ErrFetch} {
		if errors.Is(err, s) {
			return err
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: timed out", ErrFetch)
	}
	return fmt.Errorf("%w: %v", ErrFetch, err)
}
