package vllmtest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvgate/kvgate/dataplane/bridge/vllm"
)

// Fake is a fake vLLM engine: prefix caching over blocks of BlockSize
// tokens with an LRU bound, KV events for what enters and leaves the cache,
// and the HTTP API the bridge uses.
type Fake struct {
	Model     string
	BlockSize int
	Capacity  int // GPU blocks
	Encoding  Encoding

	HTTP      *http.Server
	URL       string // http://host:port
	EventsURL string // tcp://host:port of the PUB socket
	ReplayURL string // tcp://host:port of the ROUTER socket

	mu        sync.Mutex
	cache     map[vllm.Hash]*entry // engine hash -> block
	offload   offloadTier          // CPU copies of evicted blocks (WithOffload)
	loras     map[string]int       // adapter name -> vLLM lora_id (WithLoRA, runtime loads)
	lora      loraState            // the runtime adapter API (WithRuntimeLoRA, lora.go)
	kvOffload kvOffloadInfo        // what /metrics says of offloading (offload.go)
	tick      uint64
	seq       uint64
	buffer    [][2][]byte // (seq, payload) kept for replay
	drop      int         // batches to leave unpublished (still replayable)
	noReplay  bool
	running   int
	requests  []Request   // what the bridge sent, for tests
	sgl       sglangState // the SGLang mode's (sglang.go)
	nixl      *nixlState  // WithNIXL (nixl.go); guarded by mu
	mm        mmState     // WithMultimodal (multimodal.go); guarded by mu
	// topic prefixes every batch on the PUB socket (WithReplayTopic), and
	// topicInReplay puts it in replay replies too.
	topic         []byte
	topicInReplay bool

	pub, router zmq4.Socket
	cancel      context.CancelFunc
}

type entry struct {
	used   uint64
	parent vllm.Hash
	raw    []byte // the hash's bytes, as vLLM's offloading events carry it
	// prefix is the prompt up to the end of the block and lora its
	// adapter ("" for none): what kvgate's hash of the block is made of.
	prefix []uint32
	lora   string
	// mm are the prompt's images and prompt the whole prompt, when it has
	// images (an image can reach past the block).
	mm     []MMItem
	prompt []uint32
}

// Request is one completion request as the fake received it.
type Request struct {
	Model  string
	Prompt []uint32
	Body   map[string]any
}

// Option changes what Start listens on and how the fake behaves.
type Option func(*options)

type options struct {
	events, replay, http string
	cpuBlocks            int // 0: no offloading
	cpuBlockSize         int // block_size of the CPU events
	loras                map[string]int
	incremental          bool // SGLang: --incremental-streaming-output
	topic                *string
	rank, dpSize         int // SGLang with DP attention (sglang_dp.go)
	maxModelLen          int // the max_model_len GET /v1/models lists (0: 131072)
	runtimeLoRA          bool
	maxLoRAs             int
	kvOffload            kvOffloadInfo
	loraDelay            time.Duration
	loraPaths            map[string]bool
	nixl                 *nixlState
	mmTokens             func(image []byte) int
}

// WithMaxModelLen makes GET /v1/models list the model with context n, as
// vLLM started with --max-model-len n does.
func WithMaxModelLen(n int) Option { return func(o *options) { o.maxModelLen = n } }

// WithReplayTopic publishes under topic and answers replay requests as a
// later kv_events.py does, with the topic between the delimiter and the
// sequence number (and an empty one in the end marker; see
// ../replay.go).
func WithReplayTopic(topic string) Option {
	return func(o *options) { o.topic = &topic }
}

// WithAddrs listens on these host:port addresses instead of random
// loopback ports ("" keeps a random one): a fake started on the ports of
// one that was closed is a restarted engine, its sequence numbered from 0
// again and its cache empty, as vLLM's is.
func WithAddrs(events, replay, http string) Option {
	return func(a *options) { a.events, a.replay, a.http = events, replay, http }
}

// Addrs returns the fake's addresses for WithAddrs.
func (f *Fake) Addrs() (events, replay, http string) {
	return strings.TrimPrefix(f.EventsURL, "tcp://"), strings.TrimPrefix(f.ReplayURL, "tcp://"), strings.TrimPrefix(f.URL, "http://")
}

// Start runs a fake on loopback ports.
func Start(model string, blockSize, capacity int, enc Encoding, opts ...Option) (*Fake, error) {
	a := options{events: "127.0.0.1:0", replay: "127.0.0.1:0", http: "127.0.0.1:0"}
	for _, o := range opts {
		o(&a)
	}
	for _, p := range []*string{&a.events, &a.replay, &a.http} {
		if *p == "" {
			*p = "127.0.0.1:0"
		}
	}
	if a.cpuBlockSize < 0 {
		a.cpuBlockSize = blockSize
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fake{Model: model, BlockSize: blockSize, Capacity: capacity, Encoding: enc, cache: map[vllm.Hash]*entry{}, cancel: cancel,
		offload: offloadTier{capacity: a.cpuBlocks, blockSize: a.cpuBlockSize, blocks: map[vllm.Hash]*entry{}}, loras: a.loras,
		sgl: sglangState{incremental: a.incremental, rank: a.rank, dpSize: max(a.dpSize, 1)}, topic: []byte{}, nixl: a.nixl,
		kvOffload: a.kvOffload,
		lora:      loraState{paths: a.loraPaths, maxLoRAs: a.maxLoRAs, delay: a.loraDelay, roots: map[string]string{}, counter: maxID(a.loras)}}
	f.mm.tokens = a.mmTokens
	if a.topic != nil {
		f.topic, f.topicInReplay = []byte(*a.topic), true
	}
	f.pub = zmq4.NewPub(ctx)
	if err := f.pub.Listen("tcp://" + a.events); err != nil {
		cancel()
		return nil, err
	}
	f.EventsURL = "tcp://" + f.pub.Addr().String()
	f.router = zmq4.NewRouter(ctx, zmq4.WithID(zmq4.SocketIdentity("replay")))
	if err := f.router.Listen("tcp://" + a.replay); err != nil {
		f.Close()
		return nil, err
	}
	f.ReplayURL = "tcp://" + f.router.Addr().String()
	go f.serveReplay()
	ln, err := net.Listen("tcp", a.http)
	if err != nil {
		f.Close()
		return nil, err
	}
	f.URL = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	if enc == SGLang {
		f.sglangRoutes(mux)
	} else {
		mux.HandleFunc("POST /v1/completions", f.completions)
		mux.HandleFunc("GET /metrics", f.metrics)
		mux.HandleFunc("GET /v1/models", f.models(cmp.Or(a.maxModelLen, 131072)))
		f.loraRoutes(mux, a.runtimeLoRA)
		f.mmRoutes(mux)
	}
	f.HTTP = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.HTTP.Serve(ln) }()
	return f, nil
}

// Close stops the fake.
func (f *Fake) Close() {
	f.cancel()
	if f.HTTP != nil {
		_ = f.HTTP.Close()
	}
	_ = f.pub.Close()
	if f.router != nil {
		_ = f.router.Close()
	}
}

// DropNext leaves the next n batches unpublished (a subscriber sees a
// gap); they stay replayable unless NoReplay.
func (f *Fake) DropNext(n int, noReplay bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop, f.noReplay = n, noReplay
}

// Requests returns the requests received so far.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Cached reports whether the fake holds the block of this engine hash.
func (f *Fake) Cached(h vllm.Hash) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cache[h] != nil
}

// BlockHashes returns the engine hashes of a prompt's full blocks: int
// hashes for the positional encoding (the digest's last 8 bytes as a
// big-endian integer, as vLLM's maybe_convert_block_hash makes them),
// SGLang's signed ints of the first 8, 32-byte sha256 hashes for the
// tagged.
func (f *Fake) BlockHashes(prompt []uint32) []vllm.Hash {
	hs, _ := f.blockHashes("", prompt)
	return hs
}

// blockHashes is blockHashesMM of a prompt without images.
func (f *Fake) blockHashes(lora string, prompt []uint32) ([]vllm.Hash, [][]byte) {
	return f.blockHashesMM(lora, prompt, nil)
}

// blockHashesMM returns the engine hashes and raw digests of a prompt with
// images; an adapter's name and the images over a block enter its digest,
// as vLLM hashes a block's extra keys with its tokens.
func (f *Fake) blockHashesMM(lora string, prompt []uint32, mm []MMItem) ([]vllm.Hash, [][]byte) {
	var out []vllm.Hash
	var raws [][]byte
	parent := []byte("root")
	for i := 0; (i+1)*f.BlockSize <= len(prompt); i++ {
		h := sha256.New()
		h.Write(parent)
		for _, t := range prompt[i*f.BlockSize : (i+1)*f.BlockSize] {
			h.Write(binary.LittleEndian.AppendUint32(nil, t))
		}
		if lora != "" {
			h.Write([]byte(lora))
		}
		hashItems(h, mm, i*f.BlockSize, (i+1)*f.BlockSize)
		sum := h.Sum(nil)
		parent = sum
		raws = append(raws, sum)
		switch f.Encoding {
		case Positional:
			out = append(out, IntHash(binary.BigEndian.Uint64(sum[len(sum)-8:])))
		case SGLang: // hash_str_to_int64: the hex digest's first 16 digits
			out = append(out, IntHash(binary.BigEndian.Uint64(sum[:8])))
		default:
			out = append(out, BytesHash(sum))
		}
	}
	return out, raws
}

// admit caches a prompt's blocks (an adapter's when lora is not "") and
// publishes what changed in one batch: the GPU stores, the CPU copies of
// the blocks evicted for them, their GPU removals and the CPU copies that
// made room; it returns the prompt tokens that were already cached.
func (f *Fake) admit(lora string, prompt []uint32) int { return f.admitMM(lora, prompt, nil) }

// admitMM is admit of a prompt with images.
func (f *Fake) admitMM(lora string, prompt []uint32, mm []MMItem) int {
	hs, raws := f.blockHashesMM(lora, prompt, mm)
	f.mu.Lock()
	defer f.mu.Unlock()
	cached := 0
	for cached < len(hs) && f.cache[hs[cached]] != nil {
		f.tick++
		f.cache[hs[cached]].used = f.tick
		cached++
	}
	var evs []vllm.Event
	if cached < len(hs) {
		st := vllm.Event{Kind: vllm.BlockStored, BlockHashes: hs[cached:], BlockSize: f.BlockSize,
			TokenIDs: append([]uint32(nil), prompt[cached*f.BlockSize:len(hs)*f.BlockSize]...), Medium: "GPU"}
		if cached > 0 {
			st.Parent = hs[cached-1]
		}
		if lora != "" {
			st.LoRAName, st.LoRAID = lora, f.loras[lora]
		}
		st.ExtraKeys, st.MMKeys = f.blockExtras(lora, mm, cached, len(hs))
		for i, h := range hs[cached:] {
			f.tick++
			e := &entry{used: f.tick, raw: raws[i+cached], prefix: prompt[:(i+cached+1)*f.BlockSize], lora: lora}
			if len(mm) > 0 {
				e.mm, e.prompt = mm, prompt
			}
			if i+cached > 0 {
				e.parent = hs[i+cached-1]
			}
			f.cache[h] = e
		}
		evs = append(evs, st)
	}
	if over := len(f.cache) - f.Capacity; over > 0 {
		victims, entries := f.evict(over)
		evs = append(evs, f.offloadEvicted(victims, entries)...)
		evs = append(evs, vllm.Event{Kind: vllm.BlockRemoved, BlockHashes: victims, Medium: "GPU"})
		evs = append(evs, f.trimCPU()...)
	}
	if len(evs) > 0 {
		f.publish(evs)
	}
	return cached * f.BlockSize
}

// evict removes the n least recently used blocks; f.mu is held.
func (f *Fake) evict(n int) ([]vllm.Hash, []*entry) {
	var out []vllm.Hash
	var entries []*entry
	for range n {
		var victim vllm.Hash
		var oldest uint64
		for h, e := range f.cache {
			if victim == "" || e.used < oldest {
				victim, oldest = h, e.used
			}
		}
		entries = append(entries, f.cache[victim])
		delete(f.cache, victim)
		out = append(out, victim)
	}
	return out, entries
}

// Clear empties the cache (vLLM's reset_prefix_cache) and says so.
func (f *Fake) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.cache)
	clear(f.offload.blocks)
	f.publish([]vllm.Event{{Kind: vllm.AllBlocksCleared}})
}

// publish sends one batch; f.mu is held.
func (f *Fake) publish(evs []vllm.Event) {
	if f.Encoding == SGLang {
		evs = perPage(evs)
	}
	payload := EncodeBatch(f.Encoding, &vllm.Batch{TS: float64(time.Now().UnixNano()) / 1e9, Events: evs, HasRank: true, DPRank: f.sgl.rank})
	seq := f.seq
	f.seq++
	var sb [8]byte
	binary.BigEndian.PutUint64(sb[:], seq)
	if !f.noReplay {
		f.buffer = append(f.buffer, [2][]byte{sb[:], payload})
	}
	if f.drop > 0 {
		f.drop--
		return
	}
	_ = f.pub.Send(zmq4.NewMsgFrom(f.topic, sb[:], payload))
}

// replyHead is the frames of a replay reply before its sequence number:
// the client's identity and the delimiter, and topic WithReplayTopic.
func (f *Fake) replyHead(id, topic []byte) [][]byte {
	if f.topicInReplay {
		return [][]byte{id, {}, topic}
	}
	return [][]byte{id, {}}
}

// serveReplay answers replay requests as vLLM's ROUTER does.
func (f *Fake) serveReplay() {
	for {
		msg, err := f.router.Recv()
		if err != nil {
			return
		}
		if len(msg.Frames) != 3 || len(msg.Frames[2]) != 8 {
			continue
		}
		id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[2])
		f.mu.Lock()
		buf := append([][2][]byte(nil), f.buffer...)
		f.mu.Unlock()
		for _, b := range buf {
			if binary.BigEndian.Uint64(b[0]) >= start {
				_ = f.router.Send(zmq4.NewMsgFrom(append(f.replyHead(id, f.topic), b[0], b[1])...))
			}
		}
		end := make([]byte, 8)
		binary.BigEndian.PutUint64(end, ^uint64(0))
		_ = f.router.Send(zmq4.NewMsgFrom(append(f.replyHead(id, []byte{}), end, []byte{})...))
	}
}
