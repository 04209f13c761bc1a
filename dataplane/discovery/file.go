package discovery

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// File finds engines in a file of HOST:PORT addresses, one a line (blank
// lines and lines starting with # are skipped), read again every Every.
// A file that cannot be read or holds a bad line changes nothing (the
// error is logged), so a half-written file never empties the pool; write
// it whole and rename it into place.
type File struct {
	Path  string
	Every time.Duration
	Log   *slog.Logger
}

// Name implements Source.
func (f *File) Name() string { return "file:" + f.Path }

// ReadEngineFile reads and checks an engine file.
func ReadEngineFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("engine file: %w", err)
	}
	return ParseEngineList(b, path)
}

// ParseEngineList parses the lines of an engine file (named in errors).
func ParseEngineList(b []byte, name string) ([]string, error) {
	var out []string
	for n, line := range bytes.Split(b, []byte("\n")) {
		l := strings.TrimSpace(string(line))
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if err := CheckAddress(l); err != nil {
			return nil, fmt.Errorf("engine file %s line %d: %w", name, n+1, err)
		}
		out = append(out, l)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// CheckAddress refuses an engine address that is not HOST:PORT with a
// port of 1-65535.
func CheckAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: want HOST:PORT", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return fmt.Errorf("address %q: want HOST:PORT with a port of 1-65535", addr)
	}
	return nil
}

// Watch implements Source: it reads the file at once, then every Every,
// and reports its addresses whenever its content changed and parses.
func (f *File) Watch(ctx context.Context, set func([]string)) {
	log := f.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(f.Every)
	defer t.Stop()
	var last []byte
	var lastErr string
	for {
		b, err := os.ReadFile(f.Path)
		var addrs []string
		if err == nil {
			addrs, err = ParseEngineList(b, f.Path)
		}
		switch {
		case err != nil:
			if err.Error() != lastErr { // once per problem, not every tick
				log.Warn("discovery: engine file unusable: keeping the engines found before", "path", f.Path, "err", err)
				lastErr = err.Error()
			}
		case last == nil || !bytes.Equal(b, last):
			log.Info("discovery: engine file read", "path", f.Path, "engines", addrs)
			set(addrs)
			last, lastErr = append(b[:0:0], b...), ""
			if last == nil {
				last = []byte{}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
