package vllm

import (
	"container/list"
	"sync"
)

// processed is what vLLM's processor made of one image: the placeholder
// tokens it fills and its processed data (the render's kwargs_data entry,
// opaque here).
type processed struct {
	tokens uint32
	data   string
}

// processedOverhead is what an entry costs beyond its data, roughly.
const processedOverhead = 128

// RenderCache keeps the images vLLM processed, by content id, up to a byte
// bound, least recently used first out: a conversation about an image
// sends it with every turn, and vLLM's render processes it again each
// time (it skips its own processor cache), so the bridge renders only the
// images it has not kept. What vLLM makes of an image depends only on the
// image and the engine's processor settings, fixed for one engine; an
// engine restarted with other settings is caught by the placeholder count
// check, which fails the request and drops its images from the cache. A
// nil RenderCache keeps nothing. Safe for concurrent use.
type RenderCache struct {
	mu    sync.Mutex
	limit int
	used  int
	order *list.List // of *renderEntry, most recent first
	byID  map[[16]byte]*list.Element
}

type renderEntry struct {
	id [16]byte
	p  processed
}

// NewRenderCache returns a cache of up to maxBytes of processed images.
func NewRenderCache(maxBytes int) *RenderCache {
	return &RenderCache{limit: maxBytes, order: list.New(), byID: map[[16]byte]*list.Element{}}
}

func (c *RenderCache) get(id [16]byte) (processed, bool) {
	if c == nil {
		return processed{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byID[id]
	if !ok {
		return processed{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*renderEntry).p, true
}

func (c *RenderCache) put(id [16]byte, p processed) {
	size := len(p.data) + processedOverhead
	if c == nil || size > c.limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[id]; ok {
		c.removeLocked(el)
	}
	c.byID[id] = c.order.PushFront(&renderEntry{id: id, p: p})
	for c.used += size; c.used > c.limit; {
		c.removeLocked(c.order.Back())
	}
}

func (c *RenderCache) drop(id [16]byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[id]; ok {
		c.removeLocked(el)
	}
}

// removeLocked takes one entry out of the cache; c.mu is held.
func (c *RenderCache) removeLocked(el *list.Element) {
	e := el.Value.(*renderEntry)
	c.used -= len(e.p.data) + processedOverhead
	c.order.Remove(el)
	delete(c.byID, e.id)
}

// Bytes returns the bytes the cache holds, roughly.
func (c *RenderCache) Bytes() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}
