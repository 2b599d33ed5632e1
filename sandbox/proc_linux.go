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

// descendants returns every process below pid (children, their children
// ...), from the parent pids in /proc/PID/stat.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// After the command in parentheses: " STATE PPID ..."
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(string(f[1])); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var all []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		all = append(all, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return all
}

// exited reports whether process pid is gone (or a zombie: it holds
// nothing any more).
func exited(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}
