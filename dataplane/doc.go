// Package dataplane will hold kvgate's request path: HTTP ingress on gnet, the
// OpenAI and Anthropic codecs, tokenization and chat templates, the routing
// pipeline, the request lifecycle and the engine pool on netpoll
// (DESIGN.md, "Data flow of one request"). Sub-packages arrive with the
// tokenizer and daemon issues.
package dataplane
