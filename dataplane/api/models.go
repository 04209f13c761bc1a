package api

import "encoding/json"

// Model is one entry of GET /v1/models.
type Model struct {
	ID string
	// Parent is the base model of a LoRA adapter, "" for a base model.
	Parent string
	// Aliases are the other names a request may use for the model.
	Aliases []string
	// AliasOf is the model an alias entry stands for ("" for a model).
	AliasOf string
}

// EncodeModels is GET /v1/models's answer, in OpenAI's list shape: a
// model's entry lists its aliases, and each alias has an entry of its own
// (alias_of naming its model), so a client that picks an id from the
// list may pick any name the router answers to.
func EncodeModels(models []Model) []byte {
	data := make([]map[string]any, 0, len(models))
	for _, m := range models {
		e := map[string]any{"id": m.ID, "object": "model", "created": 0, "owned_by": "kvgate"}
		if m.Parent != "" {
			e["parent"] = m.Parent
		}
		if len(m.Aliases) > 0 {
			e["aliases"] = m.Aliases
		}
		if m.AliasOf != "" {
			e["alias_of"] = m.AliasOf
		}
		data = append(data, e)
	}
	b, _ := json.Marshal(map[string]any{"object": "list", "data": data})
	return b
}

// EncodeAnthropicModels is GET /v1/models's answer in Anthropic's shape
// (a request with an anthropic-version header): one page holding every
// model, aliases as entries of their own.
func EncodeAnthropicModels(models []Model) []byte {
	type entry struct {
		Type        string `json:"type"`
		ID          string `json:"id"`
		DisplayName string `json:"display_name"`
		CreatedAt   string `json:"created_at"`
	}
	data := make([]entry, 0, len(models))
	for _, m := range models {
		data = append(data, entry{Type: "model", ID: m.ID, DisplayName: m.ID, CreatedAt: "1970-01-01T00:00:00Z"})
	}
	page := struct {
		Data    []entry `json:"data"`
		HasMore bool    `json:"has_more"`
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
	}{Data: data}
	if len(data) > 0 {
		page.FirstID, page.LastID = &data[0].ID, &data[len(data)-1].ID
	}
	b, _ := json.Marshal(page)
	return b
}

// RequestModel is the "model" field of a JSON request body, "" when the
// body has none (or is not a JSON object).
func RequestModel(body []byte) string {
	var b struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &b)
	return b.Model
}
