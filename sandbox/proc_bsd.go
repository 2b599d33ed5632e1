//go:build unix && !linux

package sandbox

import "syscall"

// procAttr starts a server as the leader of its own process group, so
// signals reach all of its processes.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// settled does nothing here: there is no portable way to see a signal
// taken.
func settled(int, groupSignal) {}
