package vllm

import (
	"context"
	"fmt"
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
	cards, err := FetchModels(ctx, c, url)
	if err != nil {
		return 0, err
	}
	for _, m := range cards {
		if m.ID == model {
			if m.MaxModelLen == nil || *m.MaxModelLen < 0 {
				return 0, nil
			}
			return *m.MaxModelLen, nil
		}
	}
	return 0, fmt.Errorf("vllm: %s/v1/models does not list %q", url, model)
}
