package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// guardArg, as distlock's first argument, makes it the guard of CMD's
// process group instead of the command-line tool (see guarded).
const guardArg = "__distlock_guard"

// The kernel's parent-death signal reaches one process: the child of the
// thread that died. To end CMD's whole process group when distlock dies
// (SIGKILL, the OOM killer), `distlock run` starts CMD under a guard, a
// second distlock process that leads the group and runs CMD in it: the
// guard gets SIGUSR2 when distlock dies and answers with SIGKILL to its
// group, CMD's children included. CMD gets SIGKILL if the guard dies. The
// guard exits as CMD did, so distlock reports CMD's status.

// childAttr puts the guard in a process group of its own and has the
// kernel signal it when distlock dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGUSR2}
}

// guarded returns the program and arguments that run args under a guard,
// or args itself if distlock's own executable cannot be found.
func guarded(args []string) (string, []string) {
	exe, err := os.Executable()
	if err != nil {
		return args[0], args[1:]
	}
	return exe, append([]string{guardArg, strconv.Itoa(os.Getpid()), "--"}, args...)
}

// runGuard is the guard's main: args are distlock's pid, "--" and CMD.
func runGuard(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(os.Stderr, "distlock: guard: want PID -- CMD ARGS...")
		return 127
	}
	parent, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "distlock: guard: bad pid:", args[0])
		return 127
	}
	// Signals distlock sends the group reach CMD directly; the guard
	// only outlives CMD to report its status.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGUSR2, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if os.Getppid() != parent { // distlock died before the handler was set
		killGroup()
	}
	runtime.LockOSThread() // CMD's Pdeathsig follows this thread
	cmd := exec.Command(args[2], args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var proclaim *os.File
	if os.Getenv(proclaimFDEnv) == "3" { // elect --proclaim: fd 3 is CMD's too
		proclaim = os.NewFile(3, "proclaim")
		cmd.ExtraFiles = []*os.File{proclaim}
	}
	err = cmd.Start()
	if proclaim != nil {
		_ = proclaim.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "distlock: run:", err)
		return 127
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	for {
		select {
		case <-exited:
			return mirror(cmd.ProcessState)
		case s := <-sigs:
			if s == syscall.SIGUSR2 && os.Getppid() != parent {
				killGroup()
			}
		}
	}
}

// killGroup ends the guard's process group, the guard with it.
func killGroup() {
	_ = syscall.Kill(-syscall.Getpgrp(), syscall.SIGKILL)
	select {} // SIGKILL arrives
}

// mirror ends the guard as CMD ended: by the same signal, or with the
// same exit code.
func mirror(ps *os.ProcessState) int {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return ps.ExitCode()
	}
	sig := ws.Signal()
	signal.Reset(sig)
	_ = syscall.Kill(os.Getpid(), sig)
	time.Sleep(time.Second) // the signal arrives; else report it as a shell would
	return 128 + int(sig)
}
