package route

// PendingPrefill estimates the prefill queued on one engine: the engine's
// last LOAD report plus what routers reserved after it.
//
// A router's own reservations alone overstate the queue: a reservation
// holds a prompt's whole uncached prefill until its first token, while the
// engine works through a long prompt chunk by chunk (a 100k-token prompt
// looks untouched for the second and more it takes). The report alone
// lags new reservations. So the report is taken as the truth of its moment,
// reservations made before it arrived as counted in it, and those made
// after it are added. Peers' reservations are known only as a sum, so what
// that sum grew by since the report arrived is added.
//
// Reports are numbered (1, 2, ...; 0 means none yet, in which case the
// estimate is the reservations' sum). The zero value is ready; it is not
// safe for concurrent use.
type PendingPrefill struct {
	seq     uint64  // the report the sums below count from
	since   float64 // own prefill reserved after it and not yet started
	peersAt float64 // the peers' reserved prefill when it arrived
}

func (p *PendingPrefill) sync(seq uint64, peers float64) {
	if seq != p.seq {
		p.seq, p.since, p.peersAt = seq, 0, peers
	}
}

// Reserve counts n prefill tokens routed to the engine, whose last report
// is number seq, while the peers' reservations on it sum to peers. It
// returns the tag to give Started.
func (p *PendingPrefill) Reserve(seq uint64, peers, n float64) (tag uint64) {
	p.sync(seq, peers)
	p.since += n
	return seq
}

// Started takes back n tokens reserved under tag when their prefill is over
// (first token, or the request ended first). A report since then counts
// them already, and nothing changes.
func (p *PendingPrefill) Started(tag uint64, n float64) {
	if tag == p.seq {
		p.since -= n
	}
}

// Queued is the estimate: report (the reported queued prefill, 0 when
// none), plus own reservations since it, plus the peers' growth since it.
func (p *PendingPrefill) Queued(seq uint64, report, peers float64) float64 {
	p.sync(seq, peers)
	return report + max(p.since, 0) + max(peers-p.peersAt, 0)
}
