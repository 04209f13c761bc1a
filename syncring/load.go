package syncring

// Load is one engine's load: the work routers have sent it that has not
// finished, as one replica counts it or summed over replicas. It is the
// router's reservation (dataplane/route counts its own in it) and the
// ring's unit of reduction and broadcast, so both say it in one type. It is
// not wire.Load, the engine's own LOAD report of what it has queued.
type Load struct {
	PrefillTokens int64 // prompt tokens waiting for their first token
	DecodeTokens  int64 // KV tokens of requests decoding
	Requests      int64 // requests in flight
}

// values per engine in the reduced vector
const loadValues = 3
