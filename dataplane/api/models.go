package api

import "encoding/json"

// Model is one entry of GET /v1/models.
type Model struct {
	ID string
	// Parent is the base model of a LoRA adapter, "" for a base model.
	Parent string
}

// EncodeModels is GET /v1/models's answer, in OpenAI's list shape.
func EncodeModels(models []Model) []byte {
	data := make([]map[string]any, 0, len(models))
	for _, m := range models {
		e := map[string]any{"id": m.ID, "object": "model", "created": 0, "owned_by": "kvgate"}
		if m.Parent != "" {
			e["parent"] = m.Parent
		}
		data = append(data, e)
	}
	b, _ := json.Marshal(map[string]any{"object": "list", "data": data})
	return b
}
