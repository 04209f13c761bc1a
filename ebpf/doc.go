// Package ebpf will steer engine response streams to client sockets inside
// the kernel with socket maps (cilium/ebpf), with splice and user-space copy
// as fallbacks chosen by feature detection at start.
package ebpf
