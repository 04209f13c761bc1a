package route

import (
	"sync"

	"github.com/kvgate/kvgate/kvstore"
)

// scratch is one routing decision's working memory: candidate lists, hash
// scheme groups with their prompt hashes, match results and scores. Route
// takes one from scratches and gives it back, so a decision allocates its
// Decision and little else.
type scratch struct {
	cands, room []cand
	groups      []group // the first nGroups are this decision's
	nGroups     int
	matches     []kvstore.Match // every group's, in the order of costs
	costs       []float64       // the groups' candidates', in order
	queues      []queue         // a group's candidates' queued work (queuedAll)
	slots       []kvstore.Slot
	out         []kvstore.Match
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// scheme says how engines hash a prompt: engines hash alike when they share
// a Hasher and, for a LoRA request, give the adapter the same id.
type scheme struct {
	h    *kvstore.Hasher
	lora uint32
}

// group is the candidates of one scheme and the prompt's hashes under it.
type group struct {
	sc scheme
	es []cand
	hs []uint64
}

// group sorts the candidates that have a Hasher into groups by scheme and
// returns them; their slices are reused from earlier decisions.
func (s *scratch) group(cands []cand) []group {
	s.nGroups = 0
	for _, c := range cands {
		h := c.e.Hasher()
		if h == nil {
			continue
		}
		sc := scheme{h, c.lora}
		g := s.find(sc)
		g.es = append(g.es, c)
	}
	return s.groups[:s.nGroups]
}

// find returns the group of sc, starting a new one (on reused memory) the
// first time sc is seen in this decision.
func (s *scratch) find(sc scheme) *group {
	for i := range s.nGroups {
		if s.groups[i].sc == sc {
			return &s.groups[i]
		}
	}
	if s.nGroups == len(s.groups) {
		s.groups = append(s.groups, group{})
	}
	g := &s.groups[s.nGroups]
	s.nGroups++
	g.sc, g.es = sc, g.es[:0]
	return g
}
