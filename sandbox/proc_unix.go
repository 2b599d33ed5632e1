//go:build unix

package sandbox

import (
	"errors"
	"syscall"
)

// localSupported reports whether this system can run the local provider.
const localSupported = true

// signalGroup sends s to the whole process group pid (the server was
// started as a group leader). A group that is already gone is not an error.
func signalGroup(pid int, s groupSignal) error {
	sig := map[groupSignal]syscall.Signal{
		sigKill: syscall.SIGKILL,
		sigTerm: syscall.SIGTERM,
		sigStop: syscall.SIGSTOP,
		sigCont: syscall.SIGCONT,
	}[s]
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
