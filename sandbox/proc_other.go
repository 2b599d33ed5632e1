//go:build !unix

package sandbox

import (
	"errors"
	"os/exec"
	"syscall"
)

// localSupported reports whether this system can run the local provider.
const localSupported = false

func procAttr() *syscall.SysProcAttr { return nil }

func signalGroup(int, groupSignal) error {
	return errors.New("sandbox: process groups need a unix system")
}

func settled(int, groupSignal) {}

func signalOne(int, groupSignal) error {
	return errors.New("sandbox: signals need a unix system")
}

func descendants(int) []int { return nil }

func exited(int) bool { return true }

func runAs(*exec.Cmd, string) error {
	return errors.New("sandbox: running as another user needs a unix system")
}

func chownTo(string, ...string) error {
	return errors.New("sandbox: chown needs a unix system")
}

func brokerProcAttr() *syscall.SysProcAttr { return nil }

// lockPath does not lock here: concurrent builds of the broker each
// rename their own result into place.
func lockPath(string) (func(), error) { return func() {}, nil }
