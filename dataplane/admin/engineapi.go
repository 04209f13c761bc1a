package admin

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/kvgate/kvgate/dataplane/engine"
)

// EngineAdmin is what the engine endpoints act on (discovery.Discovery).
type EngineAdmin interface {
	Engines() []*engine.Engine
	AddEngine(addr string) (*engine.Engine, error)
	DrainEngine(key string) (*engine.Engine, error)
	RemoveEngine(key string) (*engine.Engine, error)
}

// EngineDoc is one engine in the engine endpoints' answers.
type EngineDoc struct {
	ID          string   `json:"id"` // the handshake id; "" before the first handshake
	Address     string   `json:"address"`
	State       string   `json:"state"`
	Ready       bool     `json:"ready"`
	Models      []string `json:"models"`
	OpenStreams int      `json:"open_streams"`
}

func engineDoc(e *engine.Engine) EngineDoc {
	info := e.Info()
	return EngineDoc{ID: info.ID, Address: e.Addr, State: e.State().String(), Ready: e.Ready(), Models: info.Models,
		OpenStreams: e.OpenStreams()}
}

// maxEngineBody bounds a POST /admin/engines body.
const maxEngineBody = 64 << 10

// MountEngines serves the engine endpoints:
//
//	GET    /admin/engines              {"engines": [EngineDoc...]}
//	POST   /admin/engines              {"address": "HOST:PORT"} -> 201 EngineDoc
//	POST   /admin/engines/{id}/drain   -> 202 EngineDoc (no new requests; streams finish; out of the index)
//	DELETE /admin/engines/{id}         -> 202 EngineDoc (drained, then out of the pool)
//
// {id} is an engine's handshake id or its address. The writes need
// "Authorization: Bearer <token>"; with no token they are refused (403).
// Every error is {"error": {"message", "code"}} with its status.
func (s *Server) MountEngines(api EngineAdmin, token []byte) {
	s.mux.HandleFunc("GET /admin/engines", func(w http.ResponseWriter, _ *http.Request) {
		docs := []EngineDoc{}
		for _, e := range api.Engines() {
			docs = append(docs, engineDoc(e))
		}
		writeJSON(w, http.StatusOK, map[string]any{"engines": docs})
	})
	write := func(h func(w http.ResponseWriter, r *http.Request)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if authorize(w, r, token) {
				h(w, r)
			}
		}
	}
	s.mux.HandleFunc("POST /admin/engines", write(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Address string `json:"address"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxEngineBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body over %d bytes", maxEngineBody))
				return
			}
			writeError(w, http.StatusBadRequest, "bad_json", `want {"address": "HOST:PORT"}: `+err.Error())
			return
		}
		if dec.More() {
			writeError(w, http.StatusBadRequest, "bad_json", `want one JSON object {"address": "HOST:PORT"}`)
			return
		}
		if body.Address == "" {
			writeError(w, http.StatusBadRequest, "missing_address", `want {"address": "HOST:PORT"}`)
			return
		}
		e, err := api.AddEngine(body.Address)
		if err != nil {
			writeEngineError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, engineDoc(e))
	}))
	s.mux.HandleFunc("POST /admin/engines/{id}/drain", write(func(w http.ResponseWriter, r *http.Request) {
		e, err := api.DrainEngine(r.PathValue("id"))
		if err != nil {
			writeEngineError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, engineDoc(e))
	}))
	s.mux.HandleFunc("DELETE /admin/engines/{id}", write(func(w http.ResponseWriter, r *http.Request) {
		e, err := api.RemoveEngine(r.PathValue("id"))
		if err != nil {
			writeEngineError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, engineDoc(e))
	}))
	// Anything else under /admin/engines: a JSON answer, not the mux's text.
	s.mux.HandleFunc("/admin/engines", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "/admin/engines takes GET and POST")
	})
	s.mux.HandleFunc("/admin/engines/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no endpoint "+r.Method+" "+r.URL.Path+
			": POST /admin/engines/{id}/drain or DELETE /admin/engines/{id}")
	})
}

// authorize checks the bearer token of a write, answering the refusal.
func authorize(w http.ResponseWriter, r *http.Request, token []byte) bool {
	if len(token) == 0 {
		writeError(w, http.StatusForbidden, "writes_disabled", "admin changes (engines, reload) are off: start kvgate with --admin-token-file")
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), token) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="kvgate admin"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "want Authorization: Bearer <admin token>")
		return false
	}
	return true
}

func writeEngineError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, engine.ErrBadAddress):
		writeError(w, http.StatusBadRequest, "bad_address", err.Error())
	case errors.Is(err, engine.ErrEngineExists):
		writeError(w, http.StatusConflict, "engine_exists", err.Error())
	case errors.Is(err, engine.ErrUnknownEngine):
		writeError(w, http.StatusNotFound, "unknown_engine", err.Error())
	case errors.Is(err, engine.ErrPoolClosed):
		writeError(w, http.StatusServiceUnavailable, "shutting_down", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"message": msg, "code": code}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
