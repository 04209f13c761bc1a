package route

// PendingPrefill estimates the prefill queued on one engine: the engine's
// last LOAD report plus what routers reserved that the report cannot count.
//
// A router's own reservations alone overstate the queue: a reservation
// holds a prompt's whole uncached prefill until its first token, while the
// engine works through a long prompt chunk by chunk (a 100k-token prompt
// looks untouched for the second and more it takes). The report alone
// lags new reservations. So the report is taken as the truth of its moment
// and reservations it cannot have seen are added: those made after it
// arrived, and those made up to Delay before (their GENERATE may have
// reached the engine after the report left it). Peers' reservations are
// known only as a sum, so what that sum grew by since the report arrived
// is added.
//
// Times are nanoseconds on any clock the caller keeps (wall clock live,
// virtual time in the simulation). Reports are numbered 1, 2, ...; 0 means
// none yet, and the estimate is then the reservations' sum. The zero value
// is ready; it is not safe for concurrent use.
type PendingPrefill struct {
	// Delay is how long a report may lag a reservation.
	Delay   int64
	seq     uint64 // the report the sums below count from
	cutoff  int64  // reservations made before this are in the report
	open    []pendingRes
	sum     float64 // of open
	nextTag uint64
	peersAt float64 // the peers' reserved prefill when the report arrived
}

type pendingRes struct {
	at  int64
	n   float64
	tag uint64
}

// Report tells of report number seq, which arrived at time at, while the
// peers' reservations on the engine sum to peers. Reporting the current
// number again changes nothing, so callers may call it before every use.
func (p *PendingPrefill) Report(seq uint64, at int64, peers float64) {
	if seq == p.seq {
		return
	}
	p.seq, p.cutoff, p.peersAt = seq, at-p.Delay, peers
	kept := p.open[:0]
	p.sum = 0
	for _, r := range p.open {
		if r.at >= p.cutoff {
			kept = append(kept, r)
			p.sum += r.n
		}
	}
	clear(p.open[len(kept):])
	p.open = kept
}

// Reserve counts n prefill tokens routed to the engine at time now and
// returns the tag to give Started.
func (p *PendingPrefill) Reserve(now int64, n float64) (tag uint64) {
	p.nextTag++
	p.open = append(p.open, pendingRes{at: now, n: n, tag: p.nextTag})
	p.sum += n
	return p.nextTag
}

// Started takes back a reservation whose prefill is over (first token, or
// the request ended first). One a report counts already is gone.
func (p *PendingPrefill) Started(tag uint64) {
	for i := range p.open {
		if p.open[i].tag == tag {
			p.sum -= p.open[i].n
			p.open = append(p.open[:i], p.open[i+1:]...)
			if len(p.open) == 0 {
				p.sum = 0 // no rounding left over
			}
			return
		}
	}
}

// Queued is the estimate: report (the reported queued prefill of the last
// Report, 0 when none), plus own reservations it cannot count, plus the
// peers' growth since it arrived (peers is their sum now).
func (p *PendingPrefill) Queued(report, peers float64) float64 {
	return report + max(p.sum, 0) + max(peers-p.peersAt, 0)
}
