package api

import (
	"reflect"
	"testing"
)

func TestDecodeExtras(t *testing.T) {
	cases := []struct {
		name string
		dec  func([]byte, ModelCheck) (*Request, *Error)
		body string
		want Extras
		echo bool
	}{
		{"chat logprobs", DecodeChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":3}`,
			Extras{Logprobs: true, TopLogprobs: 3, Field: "logprobs"}, false},
		{"chat logprobs false", DecodeChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"logprobs":false,"top_logprobs":0}`,
			Extras{}, false},
		{"completion logprobs n", DecodeCompletion, `{"model":"m","prompt":"p","logprobs":2}`,
			Extras{Logprobs: true, TopLogprobs: 2, Field: "logprobs"}, false},
		{"penalties", DecodeCompletion, `{"model":"m","prompt":"p","presence_penalty":0.5,"frequency_penalty":-1,"repetition_penalty":1.2}`,
			Extras{PresencePenalty: 0.5, FrequencyPenalty: -1, RepetitionPenalty: 1.2, Field: "presence_penalty"}, false},
		{"penalties off", DecodeCompletion, `{"model":"m","prompt":"p","presence_penalty":0,"frequency_penalty":0,"repetition_penalty":1}`,
			Extras{RepetitionPenalty: 1}, false},
		{"logit_bias sorted", DecodeChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"logit_bias":{"50":-100,"7":2.5}}`,
			Extras{BiasTokens: []uint32{7, 50}, Bias: []float32{2.5, -100}, Field: "logit_bias"}, false},
		{"min_tokens", DecodeCompletion, `{"model":"m","prompt":"p","max_tokens":8,"min_tokens":4}`,
			Extras{MinTokens: 4, Field: "min_tokens"}, false},
		{"echo and best_of 1", DecodeCompletion, `{"model":"m","prompt":"p","echo":true,"best_of":1}`, Extras{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, e := c.dec([]byte(c.body), nil)
			if e != nil {
				t.Fatal(e.Message)
			}
			if !reflect.DeepEqual(r.Extras, c.want) || r.Echo != c.echo {
				t.Fatalf("got %+v echo %v\nwant %+v echo %v", r.Extras, r.Echo, c.want, c.echo)
			}
		})
	}
}

// Every field out of range, or one no API here honours, is a 400 naming it.
func TestExtrasRefused(t *testing.T) {
	chat := func(extra string) string {
		return `{"model":"m","messages":[{"role":"user","content":"hi"}],` + extra + `}`
	}
	msg := func(extra string) string {
		return `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"hi"}],` + extra + `}`
	}
	cases := []struct {
		dec   func([]byte, ModelCheck) (*Request, *Error)
		body  string
		field string
	}{
		{DecodeChat, chat(`"top_logprobs":2`), "top_logprobs"},
		{DecodeChat, chat(`"logprobs":true,"top_logprobs":21`), "top_logprobs"},
		{DecodeChat, chat(`"logprobs":3`), "logprobs"},
		{DecodeChat, chat(`"presence_penalty":2.5`), "presence_penalty"},
		{DecodeChat, chat(`"frequency_penalty":-3`), "frequency_penalty"},
		{DecodeChat, chat(`"repetition_penalty":0`), "repetition_penalty"},
		{DecodeChat, chat(`"logit_bias":{"x":1}`), "logit_bias"},
		{DecodeChat, chat(`"logit_bias":{"5":101}`), "logit_bias"},
		{DecodeChat, chat(`"logit_bias":[1]`), "logit_bias"},
		{DecodeChat, chat(`"logit_bias":{"5":1,"05":2}`), "logit_bias"},
		{DecodeChat, chat(`"max_tokens":4,"min_tokens":5`), "min_tokens"},
		{DecodeChat, chat(`"n":0`), "n"},
		{DecodeChat, chat(`"n":17`), "n"},
		{DecodeCompletion, `{"model":"m","prompt":"p","n":2,"best_of":3}`, "best_of"},
		{DecodeCompletion, `{"model":"m","prompt":"p","best_of":3}`, "best_of"},
		{DecodeCompletion, `{"model":"m","prompt":"p","logprobs":true}`, "logprobs"},
		{DecodeCompletion, `{"model":"m","prompt":"p","top_logprobs":1}`, "top_logprobs"},
		{DecodeCompletion, `{"model":"m","prompt":"p","echo":true,"logprobs":1}`, "echo"},
		{DecodeCompletion, `{"model":"m","prompt":"p","suffix":"end"}`, "suffix"},
		{DecodeMessages, msg(`"logprobs":true`), "logprobs"},
		{DecodeMessages, msg(`"top_logprobs":2`), "top_logprobs"},
		{DecodeMessages, msg(`"presence_penalty":1`), "presence_penalty"},
		{DecodeMessages, msg(`"logit_bias":{}`), "logit_bias"},
		{DecodeResponses, `{"model":"m","input":"hi","top_logprobs":2}`, "top_logprobs"},
		{DecodeResponses, `{"model":"m","input":"hi","include":["reasoning.encrypted_content","message.output_text.logprobs"]}`, "include"},
	}
	for _, c := range cases {
		t.Run(c.body, func(t *testing.T) {
			_, e := c.dec([]byte(c.body), nil)
			if e == nil || e.Status != 400 || e.Param != c.field {
				t.Fatalf("got %+v, want 400 naming %s", e, c.field)
			}
		})
	}
}
