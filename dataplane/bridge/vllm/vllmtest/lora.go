package vllmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// The fake's runtime adapter API, as vLLM's (vllm-project/vllm
// vllm/frontend/entrypoints/serve/lora/api_router.py at
// 055e47c28003156421365af985d676fc921cb075 and
// vllm/entrypoints/openai/models/serving.py, OpenAIServingModels, at
// 00153c8b7948077ebdfc5bfa14e403da41aaea6d): the routes exist only with
// WithRuntimeLoRA (VLLM_ALLOW_RUNTIME_LORA_UPDATING=True), so without it
// they answer FastAPI's 404 {"detail":"Not Found"}; a load registers the
// name with the next integer id from one counter, an adapter already
// registered is refused unless load_inplace (keeping its id), a path the
// engine cannot load is 404 NotFoundError; errors are vLLM's ErrorResponse.

// LoRACall is one call of the fake's adapter API, for tests.
type LoRACall struct {
	Op     string // "load" or "unload"
	Name   string
	Path   string
	Status int
	// Registered is how many adapters were registered after the call.
	Registered int
}

// WithRuntimeLoRA serves /v1/load_lora_adapter and /v1/unload_lora_adapter
// as vLLM does with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True: paths lists the
// lora_paths that hold an adapter, and each load takes delay.
func WithRuntimeLoRA(delay time.Duration, paths ...string) Option {
	return func(o *options) {
		o.runtimeLoRA, o.loraDelay = true, delay
		if o.loraPaths == nil {
			o.loraPaths = map[string]bool{}
		}
		for _, p := range paths {
			o.loraPaths[p] = true
		}
	}
}

// WithMaxLoRAs makes the fake's /metrics carry vLLM's
// vllm:lora_requests_info gauge with max_lora n, as vLLM started with
// --enable-lora --max-loras n does once it has run a step.
func WithMaxLoRAs(n int) Option { return func(o *options) { o.maxLoRAs = n } }

// loraState is the fake's adapter registry beyond WithLoRA's names: where
// each runtime adapter came from, the id counter, the calls made.
type loraState struct {
	paths    map[string]bool // lora_paths that hold an adapter
	delay    time.Duration
	maxLoRAs int               // vllm:lora_requests_info's max_lora (0: no gauge)
	roots    map[string]string // adapter -> lora_path
	counter  int
	calls    []LoRACall
}

// loraRoutes serves the adapter API when runtime updating is on, and
// FastAPI's answer to a route it does not have when it is off.
func (f *Fake) loraRoutes(mux *http.ServeMux, runtime bool) {
	load, unload := f.loadLoRA, f.unloadLoRA
	if !runtime {
		load = func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"detail":"Not Found"}`)
		}
		unload = load
	}
	mux.HandleFunc("POST /v1/load_lora_adapter", load)
	mux.HandleFunc("POST /v1/unload_lora_adapter", unload)
}

// vllmError writes vLLM's ErrorResponse.
func vllmError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": status}})
}

// loraBody decodes a load or unload body; a required field that is absent
// is FastAPI's 422, as pydantic refuses it before the handler runs.
func loraBody(w http.ResponseWriter, r *http.Request, fields ...string) (map[string]any, bool) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"detail":[{"type":"json_invalid","loc":["body"],"msg":"JSON decode error"}]}`, http.StatusUnprocessableEntity)
		return nil, false
	}
	for _, f := range fields {
		if _, ok := body[f].(string); !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(map[string]any{"detail": []any{map[string]any{"type": "missing", "loc": []string{"body", f}, "msg": "Field required"}}})
			return nil, false
		}
	}
	return body, true
}

func (f *Fake) loadLoRA(w http.ResponseWriter, r *http.Request) {
	body, ok := loraBody(w, r, "lora_name", "lora_path")
	if !ok {
		return
	}
	name, path := body["lora_name"].(string), body["lora_path"].(string)
	inplace, _ := body["load_inplace"].(bool)
	status := f.registerLoRA(w, name, path, inplace)
	f.mu.Lock()
	f.lora.calls = append(f.lora.calls, LoRACall{Op: "load", Name: name, Path: path, Status: status, Registered: len(f.loras)})
	f.mu.Unlock()
}

// registerLoRA answers a load and returns its status.
func (f *Fake) registerLoRA(w http.ResponseWriter, name, path string, inplace bool) int {
	if name == "" || path == "" {
		vllmError(w, http.StatusBadRequest, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided.")
		return http.StatusBadRequest
	}
	f.mu.Lock()
	id, exists := f.loras[name]
	f.mu.Unlock()
	if exists && !inplace {
		vllmError(w, http.StatusBadRequest, "InvalidUserInput", fmt.Sprintf("The lora adapter '%s' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.", name))
		return http.StatusBadRequest
	}
	time.Sleep(f.lora.delay) // the engine reading the weights
	if !f.lora.paths[path] {
		vllmError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("Loading lora %s failed: No adapter found for %s", name, path))
		return http.StatusNotFound
	}
	f.mu.Lock()
	if !exists {
		f.lora.counter++
		id = f.lora.counter
	}
	if f.loras == nil {
		f.loras = map[string]int{}
	}
	f.loras[name], f.lora.roots[name] = id, path
	f.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "Success: LoRA adapter '%s' added successfully.", name)
	return http.StatusOK
}

func (f *Fake) unloadLoRA(w http.ResponseWriter, r *http.Request) {
	body, ok := loraBody(w, r, "lora_name")
	if !ok {
		return
	}
	name := body["lora_name"].(string)
	f.mu.Lock()
	_, exists := f.loras[name]
	status := http.StatusOK
	switch {
	case name == "":
		status = http.StatusBadRequest
	case !exists:
		status = http.StatusNotFound
	default:
		delete(f.loras, name)
		delete(f.lora.roots, name)
	}
	f.lora.calls = append(f.lora.calls, LoRACall{Op: "unload", Name: name, Status: status, Registered: len(f.loras)})
	f.mu.Unlock()
	switch status {
	case http.StatusBadRequest:
		vllmError(w, status, "InvalidUserInput", "'lora_name' needs to be provided to unload a LoRA adapter.")
	case http.StatusNotFound:
		vllmError(w, status, "NotFoundError", fmt.Sprintf("The lora adapter '%s' cannot be found.", name))
	default:
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "Success: LoRA adapter '%s' removed successfully.", name)
	}
}

// LoRACalls returns the adapter API calls so far, in order.
func (f *Fake) LoRACalls() []LoRACall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]LoRACall(nil), f.lora.calls...)
}

// Registered reports whether adapter name is registered on the fake now.
func (f *Fake) Registered(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.loras[name]
	return ok
}

// UnregisterAll forgets every adapter, as a vLLM restarted without its
// runtime adapters would.
func (f *Fake) UnregisterAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.loras)
	clear(f.lora.roots)
}

// servedModel resolves a completion's model: the base model (""), a
// registered adapter, or false with vLLM's 404.
func (f *Fake) servedModel(w http.ResponseWriter, model string) (lora string, ok bool) {
	f.mu.Lock()
	_, isLoRA := f.loras[model]
	f.mu.Unlock()
	switch {
	case isLoRA:
		return model, true
	case model == f.Model:
		return "", true
	}
	vllmError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", model))
	return "", false
}

// maxID is the largest vLLM lora_id of WithLoRA's adapters: runtime loads
// count on from it, as vLLM's one counter serves --lora-modules and loads.
func maxID(loras map[string]int) int {
	n := 0
	for _, id := range loras {
		n = max(n, id)
	}
	return n
}
