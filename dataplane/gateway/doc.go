// Package gateway is kvgate's request path: it serves the OpenAI and
// Anthropic endpoints on httpx, checks API keys, answers /health and
// /ready, and runs each request's lifecycle: decode (dataplane/api),
// tokenize (dataplane/tokenize), route and reserve (dataplane/route),
// stream the engine's tokens back through the API's encoder, and re-route
// a request whose engine failed before its first token. Requests for
// models that only HTTP engines serve go to dataplane/passthrough.
//
// A chat's output text goes through the parsers the model's chat template
// calls for (parsers.go: <think> reasoning, the family's tool-call syntax,
// or --tool-parser and --reasoning-parser): streamed, each piece as soon
// as it is known; whole, the text is parsed once at its end, so a
// malformed call is text.
//
// A request can fail only itself: what the model's context or the wire
// protocol cannot take is refused here with a 400 naming the field
// (limits.go), before an engine sees it; an engine's refusal of a request
// for what it holds is answered, never retried elsewhere (engineerr.go);
// every path, a client leaving mid-stream included, ends its response
// exactly once, and a panic is a 500 in the API's shape.
package gateway
