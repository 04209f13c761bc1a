package ebpf

import (
	cebpf "github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Map layouts shared by the program and the loader. The program writes
// only stat, user space writes only ctl, so neither overwrites the other.
const (
	// ctl: upstream cookie -> what user space decided.
	ctlClient   = 0  // u64: the client socket's cookie (its key in socks)
	ctlEnabled  = 8  // u64: 1 to redirect, 0 to pass everything to user space
	ctlConsumed = 16 // u64: passed bytes user space has written to the client
	ctlLimit    = 24 // u64: response bytes in all (0: until upstream EOF)
	ctlCredit   = 32 // u64: redirect only while total <= credit (client back-pressure)
	ctlSize     = 40

	// stat: upstream cookie -> what the program counted since insertion.
	// Each skb adds to exactly one of the two, so a reader that copies the
	// value while the program runs on another CPU sees each skb whole or
	// not at all (a total of both, updated apart, could be read ahead of
	// passed and end a response before its last passed bytes were read).
	statPassed     = 0 // u64: bytes handed to user space
	statRedirected = 8 // u64: bytes redirected to the client
	statSize       = 16

	skPass = 1 // SK_PASS
)

// verdict is the sk_skb stream verdict program attached to the upstream
// socket hash. For a socket without a ctl entry every skb passes to user
// space. For an upstream socket it counts the bytes and redirects the
// skb to its client's egress only when steering is enabled and user space
// has written every byte it was passed, so nothing user space still holds
// can be overtaken, and the client has credit (it has acknowledged all but
// MaxClientQueue bytes: a client that stops reading cannot make the kernel
// queue grow); otherwise it passes the skb, and user space relays it with
// TCP back-pressure. When the count reaches the response's length it tells
// user space through the ring buffer, after counting the skb.
//
//	r6 = skb; fp-8 = cookie(skb)
//	r7 = ctl[fp-8] or pass; r9 = stat[fp-8] or pass; r8 = skb->len or pass if 0
//	fp-24 = total = stat.passed + stat.redirected + r8
//	if ctl.enabled && total <= ctl.credit && stat.passed == ctl.consumed:
//		stat.redirected += r8; fp-32 = 1
//	else:
//		stat.passed += r8; fp-32 = 0
//	if ctl.limit != 0 && total >= ctl.limit: ringbuf_output(fp-8, 8)
//	if fp-32: fp-16 = ctl.client; return sk_redirect_hash(skb, clients, fp-16, 0)
//	pass
func verdict(ctl, stat, clients, done *cebpf.Map) asm.Instructions {
	prog := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnGetSocketCookie.Call(),
		asm.StoreMem(asm.RFP, -8, asm.R0, asm.DWord),
	}
	prog = append(prog, lookupCookie(ctl, asm.R7)...)
	prog = append(prog, lookupCookie(stat, asm.R9)...)
	return append(prog, asm.Instructions{
		asm.LoadMem(asm.R8, asm.R6, 0, asm.Word), // __sk_buff.len
		// An empty skb (the upstream's FIN) must not be redirected: the
		// kernel's redirect backlog treats sending 0 bytes as a broken
		// pipe and sets EPIPE on the client socket.
		asm.JEq.Imm(asm.R8, 0, "pass"),
		asm.LoadMem(asm.R1, asm.R9, statPassed, asm.DWord),
		asm.LoadMem(asm.R2, asm.R9, statRedirected, asm.DWord),
		asm.Add.Reg(asm.R1, asm.R2),
		asm.Add.Reg(asm.R1, asm.R8),
		asm.StoreMem(asm.RFP, -24, asm.R1, asm.DWord),

		asm.LoadMem(asm.R2, asm.R7, ctlEnabled, asm.DWord),
		asm.JEq.Imm(asm.R2, 0, "passcount"),
		asm.LoadMem(asm.R2, asm.R7, ctlCredit, asm.DWord),
		asm.JGT.Reg(asm.R1, asm.R2, "passcount"),
		asm.LoadMem(asm.R2, asm.R9, statPassed, asm.DWord),
		asm.LoadMem(asm.R3, asm.R7, ctlConsumed, asm.DWord),
		asm.JNE.Reg(asm.R2, asm.R3, "passcount"),

		asm.LoadMem(asm.R2, asm.R9, statRedirected, asm.DWord),
		asm.Add.Reg(asm.R2, asm.R8),
		asm.StoreMem(asm.R9, statRedirected, asm.R2, asm.DWord),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreMem(asm.RFP, -32, asm.R1, asm.DWord),
		asm.Ja.Label("notify"),

		asm.LoadMem(asm.R2, asm.R9, statPassed, asm.DWord).WithSymbol("passcount"),
		asm.Add.Reg(asm.R2, asm.R8),
		asm.StoreMem(asm.R9, statPassed, asm.R2, asm.DWord),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, -32, asm.R1, asm.DWord),

		asm.LoadMem(asm.R2, asm.R7, ctlLimit, asm.DWord).WithSymbol("notify"),
		asm.JEq.Imm(asm.R2, 0, "verdict"),
		asm.LoadMem(asm.R1, asm.RFP, -24, asm.DWord),
		asm.JLT.Reg(asm.R1, asm.R2, "verdict"),
		asm.LoadMapPtr(asm.R1, done.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.Mov.Imm(asm.R3, 8),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnRingbufOutput.Call(),

		asm.LoadMem(asm.R1, asm.RFP, -32, asm.DWord).WithSymbol("verdict"),
		asm.JEq.Imm(asm.R1, 0, "pass"),
		asm.LoadMem(asm.R2, asm.R7, ctlClient, asm.DWord),
		asm.StoreMem(asm.RFP, -16, asm.R2, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.LoadMapPtr(asm.R2, clients.FD()),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -16),
		asm.Mov.Imm(asm.R4, 0), // egress of the client socket
		asm.FnSkRedirectHash.Call(),
		asm.Return(),

		asm.Mov.Imm(asm.R0, skPass).WithSymbol("pass"),
		asm.Return(),
	}...)
}

// lookupCookie looks the cookie at fp-8 up in m and keeps the value's
// pointer in dst, or jumps to "pass" when there is none.
func lookupCookie(m *cebpf.Map, dst asm.Register) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.Mov.Reg(dst, asm.R0),
	}
}
