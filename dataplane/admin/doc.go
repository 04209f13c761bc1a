// Package admin is what an operator sees of a running kvgate on the admin
// listener: Prometheus collectors that read the engine pool, the router's
// load view, the KV index, the replica ring and the HTTP engines at scrape
// time; the /debug/state document; and pprof. The request path's own
// metrics live with it in dataplane/gateway.
package admin
