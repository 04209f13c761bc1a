package vllm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// vLLM's runtime adapter API (vllm-project/vllm at
// 055e47c28003156421365af985d676fc921cb075:
// vllm/frontend/entrypoints/serve/lora/api_router.py, and
// vllm/entrypoints/openai/models/serving.py at
// 00153c8b7948077ebdfc5bfa14e403da41aaea6d; the earlier reading,
// serving_models.py at 075e9ba, says the same):
//
//   - POST /v1/load_lora_adapter {"lora_name","lora_path"} answers 200 with a
//     plain-text "Success: ..." once engine_client.add_lora returned, so the
//     call's duration is the load's; an adapter already registered is 400
//     (InvalidUserInput, unless load_inplace), a path with no adapter 404
//     (NotFoundError: "Loading lora NAME failed: No adapter found for PATH"),
//     any other failure 500, each as {"error":{"message","type","param","code"}}.
//   - POST /v1/unload_lora_adapter {"lora_name"}: 200, or 404 "The lora
//     adapter 'NAME' cannot be found.".
//   - Both routes exist only when the server runs with
//     VLLM_ALLOW_RUNTIME_LORA_UPDATING=True (attach_router returns early
//     otherwise), so without it they answer FastAPI's 404 {"detail":"Not Found"}.
//   - GET /v1/models lists each registered adapter as a card whose parent is
//     its base model and whose root is its lora_path.

// ErrRuntimeLoRADisabled is what a load or unload fails with when the
// engine has no runtime adapter API: vLLM started without
// VLLM_ALLOW_RUNTIME_LORA_UPDATING=True.
var ErrRuntimeLoRADisabled = errors.New("vllm: the engine has no /v1/load_lora_adapter: start vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True (and --enable-lora)")

// LoRAAPIError is vLLM's refusal of an adapter load or unload: its status
// and its error message, as the engine wrote them.
type LoRAAPIError struct {
	Op, Name string // "loading" or "unloading", and the adapter
	Status   int
	Message  string
}

func (e *LoRAAPIError) Error() string {
	return fmt.Sprintf("%s LoRA adapter %q: vLLM answered %d: %s", e.Op, e.Name, e.Status, e.Message)
}

// NotFound reports whether vLLM said the adapter (its path, for a load; its
// name, for an unload) does not exist.
func (e *LoRAAPIError) NotFound() bool { return e.Status == http.StatusNotFound }

// LoadAdapter registers adapter name from path (vLLM's lora_path: a local
// directory, or what the engine's resolvers take) on the engine at url.
func LoadAdapter(ctx context.Context, c *http.Client, url, name, path string) error {
	return adapterCall(ctx, c, url+"/v1/load_lora_adapter", "loading", name, map[string]string{"lora_name": name, "lora_path": path})
}

// UnloadAdapter removes adapter name from the engine at url.
func UnloadAdapter(ctx context.Context, c *http.Client, url, name string) error {
	return adapterCall(ctx, c, url+"/v1/unload_lora_adapter", "unloading", name, map[string]string{"lora_name": name})
}

func adapterCall(ctx context.Context, c *http.Client, url, op, name string, body map[string]string) error {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%s LoRA adapter %q: %w", op, name, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	var eb struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
		Detail any `json:"detail"`
	}
	_ = json.Unmarshal(msg, &eb)
	switch {
	case eb.Error != nil:
		return &LoRAAPIError{Op: op, Name: name, Status: resp.StatusCode, Message: eb.Error.Message}
	case resp.StatusCode == http.StatusNotFound && eb.Detail == "Not Found":
		return fmt.Errorf("%s LoRA adapter %q: %w", op, name, ErrRuntimeLoRADisabled)
	}
	return &LoRAAPIError{Op: op, Name: name, Status: resp.StatusCode, Message: strings.TrimSpace(string(msg))}
}

// ModelCard is one entry of the engine's GET /v1/models: a base model
// (Parent empty) or a registered adapter (Parent its base model, Root its
// lora_path).
type ModelCard struct {
	ID          string  `json:"id"`
	Root        string  `json:"root"`
	Parent      *string `json:"parent"`
	MaxModelLen *int    `json:"max_model_len"`
}

// FetchModels reads the engine's GET /v1/models.
func FetchModels(ctx context.Context, c *http.Client, url string) ([]ModelCard, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/v1/models", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("vllm: %s/v1/models answered %d", url, resp.StatusCode)
	}
	var list struct {
		Data []ModelCard `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("vllm: reading %s/v1/models: %w", url, err)
	}
	return list.Data, nil
}

// ResidentAdapters returns the adapters the listing registers on base
// model (cards whose parent is model).
func ResidentAdapters(cards []ModelCard, model string) []string {
	var out []string
	for _, m := range cards {
		if m.Parent != nil && *m.Parent == model {
			out = append(out, m.ID)
		}
	}
	return out
}
