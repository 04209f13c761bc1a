package admin

import (
	"net/http"
)

// ReloadResult is what a configuration reload did: the flags it applied
// while serving, and those it refused (they change only with a restart;
// the values in force stay).
type ReloadResult struct {
	Applied []string `json:"applied"`
	Refused []string `json:"refused"`
}

// MountReload serves POST /admin/reload: reload reads the configuration
// again and applies what can change live. Like the engine changes it
// needs "Authorization: Bearer <token>" (403 with no token configured).
// It answers 200 with the ReloadResult, or 400 {"error": {"message",
// "code": "bad_config"}} when the new configuration is invalid (then
// nothing changed).
func (s *Server) MountReload(reload func() (*ReloadResult, error), token []byte) {
	s.mux.HandleFunc("POST /admin/reload", func(w http.ResponseWriter, r *http.Request) {
		if !authorize(w, r, token) {
			return
		}
		res, err := reload()
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_config", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	s.mux.HandleFunc("/admin/reload", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "/admin/reload takes POST")
	})
}
