package llamacpp

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Props is what the bridge reads of llama-server's GET /props
// (get_res_props in tools/server/server-context.cpp):
//
//	{"default_generation_settings": {"params": {...}, "n_ctx": 2048},
//	 "total_slots": 2, "model_alias": "model.gguf", "model_path": "...",
//	 "endpoint_slots": true, "endpoint_metrics": true,
//	 "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>",
//	 "build_info": "b1-80fb11a", ...}
//
// n_ctx is one slot's context; the server's is n_ctx × total_slots.
type Props struct {
	Settings struct {
		NCtx int `json:"n_ctx"`
	} `json:"default_generation_settings"`
	TotalSlots      int    `json:"total_slots"`
	ModelAlias      string `json:"model_alias"`
	ModelPath       string `json:"model_path"`
	EndpointSlots   bool   `json:"endpoint_slots"`
	EndpointMetrics bool   `json:"endpoint_metrics"`
	BOSToken        string `json:"bos_token"`
	EOSToken        string `json:"eos_token"`
	BuildInfo       string `json:"build_info"`
}

// maxSlots bounds the slots the bridge believes a server has.
const maxSlots = 4096

// DecodeProps decodes /props. An answer without a build or slots is not
// llama.cpp's (ErrNotLlamaCpp); impossible figures are ErrSchema.
func DecodeProps(b []byte) (*Props, error) {
	var p Props
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%w: /props: %v", ErrSchema, err)
	}
	if p.BuildInfo == "" || p.TotalSlots == 0 {
		return nil, fmt.Errorf("%w: /props has no build_info or total_slots", ErrNotLlamaCpp)
	}
	if p.TotalSlots < 0 || p.TotalSlots > maxSlots || p.Settings.NCtx <= 0 {
		return nil, fmt.Errorf("%w: /props: %d slots of %d tokens", ErrSchema, p.TotalSlots, p.Settings.NCtx)
	}
	return &p, nil
}

// Models is what the bridge reads of GET /v1/models, llama.cpp's
// (get_res_models: one entry, owned_by "llamacpp", its aliases and
// vocabulary size) or another server's (vLLM's ModelCard: owned_by "vllm"):
//
//	{"object": "list", "data": [{"id": "model.gguf", "aliases": ["model.gguf"],
//	  "owned_by": "llamacpp", "meta": {"n_vocab": 151669, "n_ctx": 2048, ...}}]}
type Models struct {
	Data []struct {
		ID      string   `json:"id"`
		Aliases []string `json:"aliases"`
		OwnedBy string   `json:"owned_by"`
		Meta    *struct {
			NVocab int `json:"n_vocab"`
		} `json:"meta"`
	} `json:"data"`
}

// DecodeModels decodes /v1/models.
func DecodeModels(b []byte) (*Models, error) {
	var m Models
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: /v1/models: %v", ErrSchema, err)
	}
	return &m, nil
}

// Names lists every name the server answers to: ids and aliases.
func (m *Models) Names() []string {
	var out []string
	for _, d := range m.Data {
		out = append(out, d.ID)
		out = append(out, d.Aliases...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Owner is the first entry's owned_by ("" when there is none).
func (m *Models) Owner() string {
	if len(m.Data) == 0 {
		return ""
	}
	return m.Data[0].OwnedBy
}

// VocabSize is the first entry's n_vocab, 0 when not given.
func (m *Models) VocabSize() int {
	if len(m.Data) == 0 || m.Data[0].Meta == nil {
		return 0
	}
	return m.Data[0].Meta.NVocab
}
