package vllm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// FetchMaxModelLen reads model's context, prompt plus output tokens, from
// the engine's GET /v1/models. vLLM lists each base model it serves with
// its max_model_len (vllm/entrypoints/openai/serving_models.py,
// show_available_models, at 075e9ba825513f0e50ae1a5185d6db0ee405f84e);
// adapters' cards carry none and inherit their base model's. It returns 0
// when the listing names model without a context, and an error when the
// engine does not answer or does not list model.
func FetchMaxModelLen(ctx context.Context, c *http.Client, url, model string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/v1/models", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("vllm: %s/v1/models answered %d", url, resp.StatusCode)
	}
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen *int   `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&list); err != nil {
		return 0, fmt.Errorf("vllm: reading %s/v1/models: %w", url, err)
	}
	for _, m := range list.Data {
		if m.ID == model {
			if m.MaxModelLen == nil || *m.MaxModelLen < 0 {
				return 0, nil
			}
			return *m.MaxModelLen, nil
		}
	}
	return 0, fmt.Errorf("vllm: %s/v1/models does not list %q", url, model)
}
