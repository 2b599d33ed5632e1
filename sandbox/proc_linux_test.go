//go:build linux

package sandbox

import (
	"os/exec"
	"syscall"
	"testing"
)

// After Pause returns, every thread of the server is stopped; after
// Resume, none is.
func TestSettled(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	stopped := func(st byte) bool { return st == 'T' }
	for _, s := range []groupSignal{sigStop, sigCont, sigStop} {
		if err := signalGroup(pid, s); err != nil {
			t.Fatal(err)
		}
		settled(pid, s)
		if got := allThreads(pid, stopped); got != (s == sigStop) {
			t.Errorf("after signal %v every thread stopped = %v", s, got)
		}
	}
	_ = syscall.Kill(pid, syscall.SIGCONT)
}
