package admin

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is the admin listener: /metrics from a registry, pprof, and
// whatever documents a binary adds (kvgate's /debug/state).
type Server struct {
	mux  *http.ServeMux
	http *http.Server
	addr string
}

// NewServer serves reg's metrics at /metrics and pprof at /debug/pprof/.
func NewServer(reg *prometheus.Registry) *Server {
	s := &Server{mux: http.NewServeMux()}
	s.mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("/debug/pprof/", pprof.Index)
	s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return s
}

// HandleJSON serves what doc returns, as JSON, at path.
func (s *Server) HandleJSON(path string, doc func() any) {
	s.mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc())
	})
}

// Listen starts serving on addr (port 0 picks one); Addr says where.
func (s *Server) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	s.addr = ln.Addr().String()
	s.http = &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(ln) }()
	return nil
}

// Addr is the address Listen bound.
func (s *Server) Addr() string { return s.addr }

// Close stops the listener.
func (s *Server) Close() error {
	if s.http == nil {
		return nil
	}
	return s.http.Close()
}
