package ebpf

import (
	"fmt"

	cebpf "github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
)

// maxPairs bounds the streams steered at once.
const maxPairs = 65536

// objects are the loaded maps and program, attached.
type objects struct {
	// socks holds upstream sockets, with the verdict program attached;
	// clients holds client sockets, with no program: a client's own bytes
	// (its next request) keep the normal path, so taking it out of the map
	// can lose nothing queued for user space.
	socks, clients, ctl, stat, done *cebpf.Map
	prog                            *cebpf.Program
	attached                        bool
	events                          *ringbuf.Reader
}

// load creates the maps, loads the verdict program and attaches it to the
// socket hash.
func load() (*objects, error) {
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; later ones
	// to the cgroup, where this does nothing.
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("ebpf: raising RLIMIT_MEMLOCK: %w", err)
	}
	o := &objects{}
	var err error
	if o.socks, err = cebpf.NewMap(&cebpf.MapSpec{Name: "kvgate_socks", Type: cebpf.SockHash, KeySize: 8, ValueSize: 8, MaxEntries: maxPairs}); err != nil {
		return nil, fmt.Errorf("ebpf: socket hash: %w", err)
	}
	if o.clients, err = cebpf.NewMap(&cebpf.MapSpec{Name: "kvgate_clients", Type: cebpf.SockHash, KeySize: 8, ValueSize: 8, MaxEntries: maxPairs}); err != nil {
		o.close()
		return nil, fmt.Errorf("ebpf: client socket hash: %w", err)
	}
	if o.ctl, err = cebpf.NewMap(&cebpf.MapSpec{Name: "kvgate_ctl", Type: cebpf.Hash, KeySize: 8, ValueSize: ctlSize, MaxEntries: maxPairs}); err != nil {
		o.close()
		return nil, fmt.Errorf("ebpf: control map: %w", err)
	}
	if o.stat, err = cebpf.NewMap(&cebpf.MapSpec{Name: "kvgate_stat", Type: cebpf.Hash, KeySize: 8, ValueSize: statSize, MaxEntries: maxPairs}); err != nil {
		o.close()
		return nil, fmt.Errorf("ebpf: counter map: %w", err)
	}
	if o.done, err = cebpf.NewMap(&cebpf.MapSpec{Name: "kvgate_done", Type: cebpf.RingBuf, MaxEntries: 1 << 16}); err != nil {
		o.close()
		return nil, fmt.Errorf("ebpf: ring buffer: %w", err)
	}
	if o.prog, err = cebpf.NewProgram(&cebpf.ProgramSpec{Name: "kvgate_verdict", Type: cebpf.SkSKB,
		AttachType: cebpf.AttachSkSKBStreamVerdict, License: "GPL", Instructions: verdict(o.ctl, o.stat, o.clients, o.done)}); err != nil {
		o.close()
		return nil, fmt.Errorf("ebpf: loading the verdict program: %w", err)
	}
	if err = link.RawAttachProgram(link.RawAttachProgramOptions{Target: o.socks.FD(), Program: o.prog, Attach: cebpf.AttachSkSKBStreamVerdict}); err != nil {
		o.close()
		return nil, fmt.Errorf("ebpf: attaching the verdict program: %w", err)
	}
	o.attached = true
	if o.events, err = ringbuf.NewReader(o.done); err != nil {
		o.close()
		return nil, fmt.Errorf("ebpf: ring buffer reader: %w", err)
	}
	return o, nil
}

func (o *objects) close() {
	if o.events != nil {
		o.events.Close()
	}
	if o.attached {
		_ = link.RawDetachProgram(link.RawDetachProgramOptions{Target: o.socks.FD(), Program: o.prog, Attach: cebpf.AttachSkSKBStreamVerdict})
	}
	if o.prog != nil {
		o.prog.Close()
	}
	for _, m := range []*cebpf.Map{o.socks, o.clients, o.ctl, o.stat, o.done} {
		if m != nil {
			m.Close()
		}
	}
}
