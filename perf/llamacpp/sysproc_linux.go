package llamacpp

import "syscall"

// sysProcAttr has the kernel kill llama-server when the process that
// started it dies, so a test binary that crashes or times out leaves no
// server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
