// Package ebpf steers the bytes of an engine's response from the upstream
// socket to the client's socket without user space (ModeSockmap), or with
// splice(2) (ModeSplice), or by copying (ModeCopy); Open picks the fastest
// mode the kernel supports that passes a self-test, and says why. Measured
// on loopback, splice is as fast as sockmap on large bodies and much
// faster on streams of small events, so it comes first (Preference);
// sockmap is not chosen by "auto": the kernel sometimes duplicates a
// segment under a paused client, which the steerer catches by abandoning
// the response (see Preference and step 6 below).
//
// The sockmap mode: upstream sockets live in a SOCKHASH keyed by socket
// cookie with an sk_skb stream-verdict program attached (written with
// cilium/ebpf's asm package, so no C compiler and no generated objects);
// client sockets live in a second SOCKHASH with no program, so a client's
// own bytes (its next request) keep the normal path. A relay goes:
//
//  1. Prepare, before the request is forwarded: both sockets enter their
//     hashes, steering off. Every response byte now goes through the
//     verdict, which passes it to user space and counts it.
//  2. User space reads the response headers (Pair.Read), writes them to the
//     client, and calls Steer with the bytes it read and the response's
//     length (Content-Length plus headers), or -1 when the upstream will
//     close the connection at the end (kvgate asks engines for that on
//     chunked streams).
//  3. The verdict redirects an skb to the client's egress only when
//     steering is on, user space has written every byte it was passed, and
//     the client has credit; otherwise it passes it. So no byte can
//     overtake one user space still holds, and a passed byte is written
//     only after every redirected byte has entered the client's socket
//     (TCP_INFO bytes_acked + SIOCOUTQ account for them).
//  4. Credit: the redirect queue in the kernel has no bound of its own, so
//     the program redirects only while the response stays within
//     MaxClientQueue bytes of what the client acknowledged; past that,
//     bytes pass to user space, which blocks on the full client and so
//     stops the upstream.
//  5. The end: the program counts the response's bytes and, at its length,
//     tells user space through a ring buffer; or the upstream's EOF ends a
//     close-delimited response. Empty skbs (the upstream's FIN) always
//     pass: redirecting one makes the kernel's backlog report a broken pipe
//     on the client. Release then takes both sockets out of the hashes and
//     the client goes back to user space; the kernel also drops closed
//     sockets from sockmaps by itself, so the maps never hold one.
//  6. Integrity: the program can never count more bytes than TCP received
//     in order on the upstream socket (TCP_INFO bytes_received) unless the
//     kernel gave it some twice. Steer checks that before the write that
//     completes a response with a length, after every megabyte it writes,
//     and at the end, and abandons the response with ErrDuplicated when it
//     fails, resetting the client's connection: the client sees a cut, not
//     a whole response with a doubled segment. (A check before every write
//     held redirecting back: 64 MB bodies took a third longer.)
//
// A reset on either side ends Steer with an error (the client's state is
// checked every few milliseconds; the upstream's read fails) and the caller
// closes both sockets.
package ebpf
