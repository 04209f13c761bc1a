// Package dataplane is the root of kvgate's request path; it holds no code
// of its own, only the packages that compose it, each one concern:
//
//	httpx       HTTP/1.1 and SSE on gnet event loops (parsing, limits, keep-alive)
//	api         pure codecs: OpenAI, Anthropic and tokenize shapes to a Request;
//	            response and event-stream encoders; error bodies; stop strings
//	gateway     endpoints, auth, /ready, the request lifecycle and retries
//	tokenize    tokenizers and chat templates
//	route       routing policies, the cost model, decisions and reservations
//	engine      the pool of wire-protocol engine connections on netpoll
//	passthrough OpenAI-compatible HTTP engines, relayed by splice or sockmap
//	admin       metrics collectors, /debug/state and pprof on the admin listener
//	bridge      adapters serving the wire protocol in front of other engines (vllm)
//	procs       the runtime's Ps for the event loops and pollers that block in epoll
//
// A request flows httpx -> gateway -> api -> tokenize -> route (kvstore
// match, load view, reserve) -> engine, and tokens flow back the same way.
// Which goroutine or lock owns each piece of shared state is written down
// in LOCKS.md beside this file.
package dataplane
