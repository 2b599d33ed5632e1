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

// descendants finds nothing here (no /proc): a server whose children leave
// its process group (PostgreSQL) is signalled through its group only.
func descendants(int) []int { return nil }

// exited reports true: without /proc nothing can be checked.
func exited(int) bool { return true }
