package wire

import "fmt"

// MediaAssembly is the engine side of a GENERATE with media: it keeps the
// GENERATE (copied out of its frame, which the reader reuses) and collects
// the MEDIA frames that follow it on its stream, in order, until every
// item's last byte is there. The bytes are appended as they arrive, never
// allocated ahead for a size the peer declared. One goroutine uses it (the
// connection's read loop).
type MediaAssembly struct {
	g     Generate
	sizes []int // each item's declared size
	total int   // their sum
	items []MediaItem
	data  []byte // every item's bytes received so far, back to back
	item  int    // the item the next chunk belongs to
	got   int    // its bytes received
}

// NewMediaAssembly starts collecting the media of g, a GENERATE with
// GenMedia decoded under lim. g is copied: it may be a view into a frame.
func NewMediaAssembly(g *Generate, lim *Limits) (*MediaAssembly, error) {
	if g.Flags&GenMedia == 0 || g.Media.Len() == 0 {
		return nil, fmt.Errorf("assembling media of a GENERATE without any: %w", ErrUnexpectedFrame)
	}
	p, err := g.AppendPayload(make([]byte, 0, g.PayloadSize()))
	if err != nil {
		return nil, err
	}
	a := &MediaAssembly{}
	if err := a.g.Decode(p, lim); err != nil {
		return nil, err
	}
	a.sizes = make([]int, a.g.Media.Len())
	a.g.Media.each(func(i int, _ MediaItem, size int) { a.sizes[i], a.total = size, a.total+size })
	return a, nil
}

// Add takes the stream's next MEDIA frame. A chunk for another item than
// the one being received, at another offset than the bytes received so
// far, or past the item's size is an error wrapping ErrBadValue (the
// request fails: stream ERROR BAD_REQUEST; the connection goes on).
func (a *MediaAssembly) Add(ch *MediaChunk) error {
	switch {
	case a.Done():
		return fmt.Errorf("MEDIA for item %d after the last item's bytes: %w", ch.Item, ErrBadValue)
	case int(ch.Item) != a.item:
		return fmt.Errorf("MEDIA for item %d while item %d has %d of its %d bytes: %w", ch.Item, a.item, a.got, a.sizes[a.item], ErrBadValue)
	case int(ch.Offset) != a.got:
		return fmt.Errorf("MEDIA for item %d at offset %d, want %d: %w", ch.Item, ch.Offset, a.got, ErrBadValue)
	case len(ch.Data) > a.sizes[a.item]-a.got:
		return fmt.Errorf("MEDIA for item %d: %d bytes at offset %d pass its size %d: %w", ch.Item, len(ch.Data), ch.Offset, a.sizes[a.item], ErrBadValue)
	}
	if need := len(a.data) + len(ch.Data); need > cap(a.data) {
		// Double what arrived, up to the declared total: at most twice
		// the bytes received are ever allocated, and nothing past the
		// total is.
		a.data = append(make([]byte, 0, min(max(2*cap(a.data), need), a.total)), a.data...)
	}
	a.data = append(a.data, ch.Data...)
	a.got += len(ch.Data)
	for a.item < len(a.sizes) && a.got == a.sizes[a.item] {
		a.item, a.got = a.item+1, 0
	}
	return nil
}

// Done reports whether every item's bytes arrived.
func (a *MediaAssembly) Done() bool { return a.item == len(a.sizes) }

// Received returns the media bytes received so far.
func (a *MediaAssembly) Received() int { return len(a.data) }

// Generate returns the GENERATE with its media's bytes, once Done; it stays
// valid as long as the assembly. Check it with CheckMedia before running it.
func (a *MediaAssembly) Generate() (*Generate, error) {
	if !a.Done() {
		return nil, fmt.Errorf("media item %d: %d of %d bytes: %w", a.item, a.got, a.sizes[a.item], ErrTruncated)
	}
	if a.items == nil {
		m := a.g.Media
		a.items = make([]MediaItem, m.Len())
		off := 0
		m.each(func(i int, it MediaItem, size int) {
			it.Data = a.data[off : off+size : off+size]
			a.items[i] = it
			off += size
		})
		a.g.Media = Media{items: a.items, recs: m.recs, n: m.n}
	}
	return &a.g, nil
}
