//go:build !unix

package sandbox

import (
	"errors"
	"syscall"
)

// localSupported reports whether this system can run the local provider.
const localSupported = false

func procAttr() *syscall.SysProcAttr { return nil }

func signalGroup(int, groupSignal) error {
	return errors.New("sandbox: process groups need a unix system")
}

func settled(int, groupSignal) {}
