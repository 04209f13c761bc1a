package llamacpp

import (
	"encoding/json"
	"fmt"
)

// Slot is what the bridge reads of one slot in GET /slots (server_slot
// to_json with only_metrics, tools/server/server-context.cpp at 80fb11ac;
// the prompt's text appears only under LLAMA_SERVER_SLOTS_DEBUG, and no
// version exposes a slot's token ids):
//
//	[{"id":0,"n_ctx":2048,"speculative":false,"is_processing":true,"id_task":1715,
//	  "n_prompt_tokens":400,"n_prompt_tokens_processed":0,"n_prompt_tokens_cache":0,
//	  "params":{...},"next_token":[{"has_next_token":true,"has_new_line":false,
//	  "n_remain":30,"n_decoded":0}]}, ...]
//
// A slot never used has only id, n_ctx, speculative and is_processing.
// n_prompt_tokens counts the tokens the slot's cache holds (prompt and
// generated so far), whatever task put them there; n_prompt_tokens_cache
// and _processed are the current task's reuse and work and read 0 once
// the slot is released (its stats are reset), and id_task stays the last
// task's.
type Slot struct {
	ID            int  `json:"id"`
	NCtx          int  `json:"n_ctx"`
	IsProcessing  bool `json:"is_processing"`
	Task          *int `json:"id_task"`
	NPromptTokens int  `json:"n_prompt_tokens"`
	NPromptCache  int  `json:"n_prompt_tokens_cache"`
	NPromptDone   int  `json:"n_prompt_tokens_processed"`
	NextToken     []struct {
		NDecoded int `json:"n_decoded"`
	} `json:"next_token"`
}

// TaskID is the slot's last task, -1 for a slot never used.
func (s *Slot) TaskID() int {
	if s.Task == nil {
		return -1
	}
	return *s.Task
}

// Decoded is how many tokens the slot's task generated so far.
func (s *Slot) Decoded() int {
	if len(s.NextToken) == 0 {
		return 0
	}
	return s.NextToken[0].NDecoded
}

// started reports whether the slot's task has begun on its prompt: before
// that the slot's cache is the last task's.
func (s *Slot) started() bool {
	return s.NPromptDone > 0 || s.NPromptCache > 0 || s.Decoded() > 0
}

// DecodeSlots decodes /slots. Slots come in id order, 0 to n-1; counts
// are not negative.
func DecodeSlots(b []byte) ([]Slot, error) {
	var slots []Slot
	if err := json.Unmarshal(b, &slots); err != nil {
		return nil, fmt.Errorf("%w: /slots: %v", ErrSchema, err)
	}
	if len(slots) > maxSlots {
		return nil, fmt.Errorf("%w: /slots lists %d slots", ErrSchema, len(slots))
	}
	for i := range slots {
		s := &slots[i]
		if s.ID != i || s.NCtx < 0 || s.NPromptTokens < 0 || s.NPromptCache < 0 || s.NPromptDone < 0 || s.Decoded() < 0 {
			return nil, fmt.Errorf("%w: /slots entry %d: %+v", ErrSchema, i, *s)
		}
	}
	return slots, nil
}
