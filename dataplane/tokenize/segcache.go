package tokenize

import (
	"container/list"
	"strings"
	"sync"

	"github.com/zeebo/xxh3"
)

// segmentCache remembers the ids of long text segments between added
// tokens. Hugging Face tokenizes each such segment independently of the rest
// of the input (added tokens split the input before normalization and
// pre-tokenization), so a cached segment's ids are exactly what encoding it
// again would give. In a conversation the rendered history repeats on every
// turn; with this cache only the new turn is tokenized.
type segmentCache struct {
	mu    sync.Mutex
	bytes int
	lru   *list.List // of *segEntry, most recent at the front
	m     map[uint64]*list.Element
}

type segEntry struct {
	key  uint64
	text string
	ids  []uint32
}

const (
	// segmentCacheMin is the shortest segment worth caching.
	segmentCacheMin = 256
	// segmentCacheMaxBytes bounds the cache (text plus ids).
	segmentCacheMaxBytes = 64 << 20
)

func (c *segmentCache) get(s string) ([]uint32, bool) {
	key := xxh3.HashString(s)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		return nil, false
	}
	el, ok := c.m[key]
	if !ok || el.Value.(*segEntry).text != s {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*segEntry).ids, true
}

func (c *segmentCache) put(s string, ids []uint32) {
	e := &segEntry{key: xxh3.HashString(s), text: strings.Clone(s), ids: append([]uint32(nil), ids...)}
	size := len(e.text) + 4*len(e.ids) + 64
	if size > segmentCacheMaxBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m, c.lru = make(map[uint64]*list.Element), list.New()
	}
	if old, ok := c.m[e.key]; ok {
		c.drop(old)
	}
	c.m[e.key] = c.lru.PushFront(e)
	c.bytes += size
	for c.bytes > segmentCacheMaxBytes {
		c.drop(c.lru.Back())
	}
}

func (c *segmentCache) drop(el *list.Element) {
	e := c.lru.Remove(el).(*segEntry)
	delete(c.m, e.key)
	c.bytes -= len(e.text) + 4*len(e.ids) + 64
}
