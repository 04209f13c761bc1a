package tokenize

import (
	"bytes"
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/zeebo/xxh3"
)

// chatPrefix is a conversation's rendering, remembered for its next turn.
type chatPrefix struct {
	extra string // the template variables it was rendered with
	// raw is the messages array from its '[' to the end of its last
	// message; a later turn's array starts with these bytes and then,
	// after whitespace, a ','.
	raw []byte
	// headEnd is the offset in raw just past the head messages.
	headEnd int
	// text is the rendering without the generation prompt; textArr is
	// its bytes where they may grow in place (chat_grow.go), else nil.
	text      string
	textArr   []byte
	textGrown growth
	// head is the rendering of the head messages alone, once known.
	head      string
	headKnown bool

	// ids are the token ids of text's start, attached once by the
	// tokenizer that encoded a turn ending with it (chat_encode.go).
	ids atomic.Pointer[prefixIDs]
	// grown is who extends raw's array in place (chat_grow.go).
	grown growth

	key    uint64
	el     *list.Element
	cached bool   // in the cache (put and not dropped)
	used   uint64 // the cache's clock when last put or found
}

// size is what p holds, in bytes, its ids included once attached; it is
// read under the cache's lock, which attach takes too.
func (p *chatPrefix) size() int {
	n := len(p.raw) + len(p.text) + len(p.head) + 128
	if e := p.ids.Load(); e != nil {
		n += 4*len(e.ids) + 32
	}
	return n
}

// prefixCache holds recent conversation renderings, bounded in bytes,
// least recently used first out. Prefixes that share their head and first
// reply (and variables) share a bucket, and a lookup compares bytes, never
// hashes alone: a collision costs a comparison, not a wrong prompt.
type prefixCache struct {
	mu      sync.Mutex
	max     int
	bytes   int
	lru     list.List // of *chatPrefix, most recent at the front
	buckets map[uint64][]*chatPrefix
	clock   uint64 // counts puts and hits
}

const (
	// prefixCacheMaxBytes bounds the renderings a template keeps.
	prefixCacheMaxBytes = 32 << 20
	// prefixBucketMax bounds the prefixes that share one head, so a
	// popular system prompt and first message cannot make lookups long.
	prefixBucketMax = 16
)

func newPrefixCache(max int) *prefixCache {
	return &prefixCache{max: max, buckets: make(map[uint64][]*chatPrefix)}
}

func bucketKey(extra string, head []byte) uint64 {
	h := xxh3.New()
	_, _ = h.WriteString(extra)
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(head)
	return h.Sum64()
}

// keyEnd is where the bytes that key a prefix's bucket end: past the
// message after the head (in a chat, the first reply), or past the head
// when there is none. Conversations of one application share their system
// prompt and often their first message; they part at the reply.
func keyEnd(raw []byte, headEnd int) int {
	comma, ok := commaAt(raw, headEnd)
	if !ok {
		return headEnd
	}
	end, _, ok := nextElement(raw, comma+1)
	if !ok {
		return headEnd
	}
	return endOf(raw, end)
}

// longest returns the longest remembered prefix of raw, a messages array
// whose head ends at headEnd, that raw continues with a ','. It looks in
// two buckets: the head's (a prefix that is the head alone) and the first
// reply's (longer ones).
func (c *prefixCache) longest(extra string, raw []byte, headEnd int) *chatPrefix {
	keys := [2]uint64{bucketKey(extra, raw[:headEnd]), bucketKey(extra, raw[:keyEnd(raw, headEnd)])}
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *chatPrefix
	for _, key := range keys {
		for _, p := range c.buckets[key] {
			n := len(p.raw)
			if p.headEnd != headEnd || n >= len(raw) || (best != nil && n <= len(best.raw)) {
				continue
			}
			if _, comma := commaAt(raw, n); !comma {
				continue
			}
			if p.extra == extra && bytes.Equal(p.raw, raw[:n]) {
				best = p
			}
		}
	}
	if best != nil {
		c.lru.MoveToFront(best.el)
		c.clock++
		best.used = c.clock
	}
	return best
}

// put remembers p, replacing a prefix of the same bytes.
func (c *prefixCache) put(p *chatPrefix) {
	if p.size() > c.max/4 {
		return
	}
	p.key = bucketKey(p.extra, p.raw[:keyEnd(p.raw, p.headEnd)])
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buckets[p.key]
	for _, old := range b {
		if old.extra == p.extra && bytes.Equal(old.raw, p.raw) {
			c.drop(old)
			break
		}
	}
	if b = c.buckets[p.key]; len(b) >= prefixBucketMax {
		c.drop(leastUsed(b))
	}
	c.clock++
	p.el, p.cached, p.used = c.lru.PushFront(p), true, c.clock
	c.buckets[p.key] = append(c.buckets[p.key], p)
	c.bytes += p.size()
	for c.bytes > c.max {
		c.drop(c.lru.Back().Value.(*chatPrefix))
	}
}

// leastUsed is the prefix of b put or found longest ago: many
// conversations that share their start keep the one they all continue.
func leastUsed(b []*chatPrefix) *chatPrefix {
	least := b[0]
	for _, p := range b[1:] {
		if p.used < least.used {
			least = p
		}
	}
	return least
}

func (c *prefixCache) drop(p *chatPrefix) {
	c.lru.Remove(p.el)
	c.bytes -= p.size()
	p.cached = false
	b := c.buckets[p.key]
	for i, q := range b {
		if q == p {
			b = append(b[:i], b[i+1:]...)
			break
		}
	}
	if len(b) == 0 {
		delete(c.buckets, p.key)
	} else {
		c.buckets[p.key] = b
	}
}

// attach gives p, if it is still cached, the ids e (once), counting
// their bytes against the bound.
func (c *prefixCache) attach(p *chatPrefix, e *prefixIDs) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !p.cached || p.ids.Load() != nil {
		return
	}
	c.bytes -= p.size()
	p.ids.Store(e)
	c.bytes += p.size()
	for c.bytes > c.max {
		c.drop(c.lru.Back().Value.(*chatPrefix))
	}
}

// len reports the prefixes held and their bytes.
func (c *prefixCache) len() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}
