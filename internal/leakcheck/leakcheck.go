// Package leakcheck fails a test binary whose tests leave goroutines
// running: a lock library's watchdogs, waiters and notifiers must all end
// with the Locker or lease that started them.
//
// It does what go.uber.org/goleak's VerifyTestMain does, in the few lines a
// library's tests need, so that the library's go.mod, and with it the
// go.sum of every program that imports a driver, holds no module for it
// (docs/architecture.md, TestDriverTestGraphsHoldOnlyTheirStore).
package leakcheck

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// VerifyTestMain runs the tests, then, if they passed, fails the binary
// when goroutines other than the runtime's and the testing package's are
// still running once they have had time to end (Find). after runs between
// the tests and the check (stopping shared servers, say); nil skips it.
func VerifyTestMain(m *testing.M, after func() error) {
	code := m.Run()
	if after != nil {
		if err := after(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if code == 0 {
		if err := Find(Patience); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// Patience is how long Find gives goroutines that are ending (a closed
// connection's reader, a watchdog seeing its stop) before it calls them
// leaked. Busy machines are slow to schedule them: it is generous.
const Patience = 10 * time.Second

// Find returns an error listing the goroutines, other than the caller's,
// the runtime's and the testing package's, still running after up to
// patience; nil when there are none.
func Find(patience time.Duration) error {
	deadline := time.Now().Add(patience)
	wait := time.Millisecond
	for {
		leaked := Running()
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leakcheck: %d goroutine(s) still running after the tests:\n\n%s",
				len(leaked), strings.Join(leaked, "\n\n"))
		}
		time.Sleep(wait) // letting goroutines end: there is no event to wait on
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// Running returns the stacks of the goroutines other than the caller's,
// the runtime's and the testing package's.
func Running() []string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range bytes.Split(buf, []byte("\n\n")) {
		if i == 0 { // runtime.Stack lists the calling goroutine first
			continue
		}
		if s := string(bytes.TrimSpace(g)); s != "" && !ignored(s) {
			out = append(out, s)
		}
	}
	return out
}

// ignoredTops are the functions on top of goroutines that the runtime and
// the standard library keep for the life of the process.
var ignoredTops = []string{
	"os/signal.signal_recv", "os/signal.loop", "runtime.ensureSigM",
	"runtime.ReadTrace", "runtime/trace.Start.func1",
}

// ignoredAnywhere are functions whose presence in a stack marks the
// testing package's own goroutines (the test runner, a fuzz worker).
var ignoredAnywhere = []string{
	"testing.RunTests(", "testing.(*T).Run(", "testing.(*F).Fuzz(", "testing.runFuzzTests(",
	"testing.runFuzzing(", "testing.(*M).Run(", "testing.tRunner.func1(",
}

func ignored(stack string) bool {
	lines := strings.Split(stack, "\n")
	if len(lines) > 1 {
		top := lines[1]
		for _, f := range ignoredTops {
			if strings.HasPrefix(top, f+"(") {
				return true
			}
		}
	}
	for _, f := range ignoredAnywhere {
		if strings.Contains(stack, f) {
			return true
		}
	}
	return false
}
