package vllmtest

// The request models of vLLM's render and tokens-in endpoints, as the fake
// checks them (schema.go), vllm-project/vllm at
// 0001948bc76939369ca855c90b36d81256477e85 unless said otherwise.

// samplingParamsSchema is SamplingParams' input fields
// (vllm/sampling_params.py at 00388f6573ccfcffad607b8c9ecdf341a4669ceb).
var samplingParamsSchema = object(map[string]check{
	"n": intAtLeast(1), "presence_penalty": isNumber, "frequency_penalty": isNumber, "repetition_penalty": isNumber,
	"temperature": isNumber, "top_p": isNumber, "top_k": isInt, "min_p": isNumber, "seed": nullable(isInt),
	"stop": nullable(anyValue), "stop_token_ids": nullable(listOf(intAtLeast(0), 0)), "ignore_eos": isBool,
	"max_tokens": nullable(intAtLeast(1)), "min_tokens": intAtLeast(0), "logprobs": nullable(isInt),
	"prompt_logprobs": nullable(isInt), "detokenize": isBool, "skip_special_tokens": isBool,
	"spaces_between_special_tokens": isBool, "include_stop_str_in_output": isBool, "stream_interval": nullable(intAtLeast(1)),
	"logit_bias": nullable(dictOf(isNumber)), "allowed_token_ids": nullable(listOf(intAtLeast(0), 0)),
	"extra_args": nullable(dictOf(anyValue)), "bad_words": nullable(listOf(isString, 0)),
})

// placeholderSchema is PlaceholderRangeInfo (the newest adds is_embed).
var placeholderSchema = object(map[string]check{"offset": intAtLeast(0), "length": intAtLeast(1), "is_embed": nullable(listOf(isBool, 0))},
	"offset", "length")

// featuresSchema is MultiModalFeatures; the consistency of its parallel
// fields is checked after (mmFeaturesOf).
var featuresSchema = object(map[string]check{
	"mm_hashes":       dictOf(listOf(isString, 0)),
	"mm_placeholders": dictOf(listOf(placeholderSchema, 0)),
	"kwargs_data":     nullable(dictOf(listOf(nullable(isString), 0))),
}, "mm_hashes", "mm_placeholders")

// streamOptionsSchema is StreamOptions.
var streamOptionsSchema = object(map[string]check{"include_usage": nullable(isBool), "continuous_usage_stats": nullable(isBool)})

// generateSchema is GenerateRequest (vllm/entrypoints/serve/disagg/protocol.py).
var generateSchema = object(map[string]check{
	"request_id": isString, "token_ids": listOf(intAtLeast(0), 1), "features": nullable(featuresSchema),
	"sampling_params": samplingParamsSchema, "model": nullable(isString), "stream": nullable(isBool),
	"stream_options": nullable(streamOptionsSchema), "cache_salt": nullable(isString), "priority": isInt,
	"kv_transfer_params": nullable(dictOf(anyValue)),
}, "token_ids", "sampling_params")

// renderSchema is the part of ChatCompletionRequest the bridge sends to
// /v1/chat/completions/render: a model and messages of text and image_url
// parts, each image with an optional uuid (vllm/entrypoints/chat_utils.py,
// ChatCompletionContentPartImageParam and its uuid).
var renderSchema = object(map[string]check{
	"model": nullable(isString), "max_tokens": nullable(intAtLeast(1)),
	"messages": listOf(object(map[string]check{
		"role": isString,
		"content": listOf(object(map[string]check{
			"type": isString, "text": isString, "uuid": nullable(isString),
			"image_url": object(map[string]check{"url": isString, "detail": isString}, "url"),
		}, "type"), 1),
	}, "role", "content"), 1),
}, "messages")
