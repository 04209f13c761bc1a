package bridgeutil

import "github.com/kvgate/kvgate/wire"

// SnapshotChunk bounds the events of one SNAPSHOT frame.
const SnapshotChunk = 1 << 15

// SnapshotFrames cuts a rank's snapshot events into SNAPSHOT frames of at
// most SnapshotChunk events, numbered from 0, the last marked; no events
// still make one (empty, last) frame, which tells the router the rank is
// empty.
func SnapshotFrames(id uint32, seq uint64, rank uint16, evs []wire.Event) []wire.Message {
	var frames []wire.Message
	for start, chunk := 0, uint32(0); ; chunk++ {
		end := min(start+SnapshotChunk, len(evs))
		m := &wire.Snapshot{SnapshotID: id, Chunk: chunk, Last: end == len(evs), Seq: seq, DPRank: rank, Events: evs[start:end]}
		frames = append(frames, m)
		if m.Last {
			return frames
		}
		start = end
	}
}
