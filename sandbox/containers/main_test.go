package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The test binary runs the broker itself when asked (see TestMain).
const envRunBroker = "DISTLOCK_TEST_RUN_BROKER"

func TestMain(m *testing.M) {
	if os.Getenv(envRunBroker) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// startBroker runs the broker as a child process with the given stdout
// and stderr handling.
func startBroker(t *testing.T) (*exec.Cmd, *os.File, *os.File) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRunBroker+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = outW, outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, stdin.(*os.File), outR
}

// waitExit waits (bounded) for the broker to exit and returns its error.
func waitExit(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatal("the broker did not exit within 2 minutes of its stdin closing")
		return nil
	}
}

// A request answers with its id; closing stdin ends the broker, exit 0.
func TestBrokerRepliesAndExitsAtEOF(t *testing.T) {
	cmd, stdin, out := startBroker(t)
	if _, err := stdin.WriteString(`{"id":7,"op":"no-such-op"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var rep reply
	for sc.Scan() { // skip log lines on the shared pipe
		if json.Unmarshal(sc.Bytes(), &rep) == nil && rep.ID == 7 {
			break
		}
	}
	if rep.ID != 7 || rep.Error == "" || !strings.Contains(rep.Error, `unknown op "no-such-op"`) {
		t.Fatalf("reply %+v, want id 7 and an error naming the unknown op", rep)
	}
	stdin.Close()
	if err := waitExit(t, cmd); err != nil {
		t.Fatalf("broker exit: %v, want 0", err)
	}
}

// A broker whose parent died has stdout and stderr without a reader: it
// must still finish (and remove what it made), not die of SIGPIPE on its
// next reply or log line (it did, leaving a ZooKeeper ensemble running).
func TestBrokerSurvivesBrokenStdout(t *testing.T) {
	cmd, stdin, out := startBroker(t)
	out.Close() // the reader is gone, as when the parent is SIGKILLed
	if _, err := stdin.WriteString(`{"id":1,"op":"no-such-op"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	err := waitExit(t, cmd)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("broker with a broken stdout: %v (%s), want exit 0", err, ee.ProcessState)
	}
	if err != nil {
		t.Fatal(err)
	}
}
