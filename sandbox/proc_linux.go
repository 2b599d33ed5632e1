//go:build linux

package sandbox

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// procAttr starts a server as the leader of its own process group, so
// signals reach all of its processes, and has the kernel kill it when the
// thread that started it dies, so a crashed test leaves no server behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// settled waits (up to a second) until every thread of process pid has
// taken s: stopped for sigStop, running again for sigCont. kill returns
// once the signal is queued; a thread busy on another core takes it a
// moment later, and a request it serves meanwhile would be answered by a
// server the caller believes paused.
func settled(pid int, s groupSignal) {
	if s != sigStop && s != sigCont {
		return
	}
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if allThreads(pid, func(state byte) bool { return (state == 'T') == (s == sigStop) }) {
			return
		}
	}
}

// allThreads reports whether every thread of pid is in a state ok accepts
// (the state letter of /proc/PID/task/TID/stat); true if pid is gone.
func allThreads(pid int, ok func(state byte) bool) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			continue // the thread exited
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) {
			continue
		}
		if st := stat[i+2]; st != 'Z' && st != 'X' && !ok(st) {
			return false
		}
	}
	return true
}
