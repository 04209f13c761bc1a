//go:build !linux

package llamacpp

import "syscall"

// sysProcAttr is empty where the kernel cannot tie a child's life to its
// parent's.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
