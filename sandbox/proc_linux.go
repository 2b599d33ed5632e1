//go:build linux

package sandbox

import "syscall"

// procAttr starts a server as the leader of its own process group, so
// signals reach all of its processes, and has the kernel kill it when the
// thread that started it dies, so a crashed test leaves no server behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
