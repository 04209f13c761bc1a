// Package gateway is kvgate's request path: it serves the OpenAI and
// Anthropic endpoints on httpx, checks API keys, answers /health and
// /ready, and runs each request's lifecycle: decode (dataplane/api),
// tokenize (dataplane/tokenize), route and reserve (dataplane/route),
// stream the engine's tokens back through the API's encoder, and re-route
// a request whose engine failed before its first token. Requests for
// models that only HTTP engines serve go to dataplane/passthrough.
package gateway
