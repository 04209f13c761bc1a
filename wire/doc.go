// Package wire implements kvgate's binary engine protocol, version 1: the
// frames that routers, engines and replicas exchange over TCP. PROTOCOL.md in
// this directory is the normative spec; testdata/golden holds its vectors.
//
// Every frame is a 12-byte header and a payload, all integers little-endian:
//
//	0      1      2             4                        8                       12
//	+------+------+-------------+------------------------+------------------------+
//	| type | flags| reserved=0  |  length (u32)          |  stream id (u32)       |
//	+------+------+-------------+------------------------+------------------------+
//	| payload (length bytes; flags bits 0-1 name its codec: none, s2, zstd)      |
//
// Stream 0 carries connection-level frames (handshake, KV_EVENTS, LOAD, PING,
// GOAWAY); a router opens streams with GENERATE and the engine answers on the
// same stream id with TOKENS until a frame flagged last, or an ERROR.
//
// The package has three layers:
//
//   - messages (Generate, TokensMsg, KVEvents...) with AppendPayload and
//     Decode; decoding keeps views into the payload (Tokens, Hashes, []byte),
//     so GENERATE and TOKENS decode without allocating;
//   - framing: SplitFrame and Decompress work on any contiguous buffer (a
//     gnet or netpoll input buffer), Reader on any io.Reader, and Writer
//     batches frames from concurrent senders into few writes;
//   - the handshake: HELLO, WELCOME and optional challenge-response AUTH
//     (DialHandshake, AcceptHandshake, or Dial/Client/Server on a net.Conn).
//     Until it completes an acceptor reads no frame over MaxHandshakeFrame
//     into a 1 KiB buffer, and a listener holds at most so many such peers
//     (HandshakeGate), so an unauthenticated peer costs about a kilobyte.
//
// Decoding failures wrap one of the Err* sentinels; nothing is allocated for
// a size a peer declares until the bytes are there and within Limits.
package wire
