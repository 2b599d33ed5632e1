package main

import "syscall"

// childAttr puts CMD in its own process group and has the kernel kill it
// (SIGKILL) when distlock dies. Pdeathsig reaches CMD only, not the rest of
// its process group.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
