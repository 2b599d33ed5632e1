//go:build !linux

package main

import "syscall"

// childAttr puts CMD in its own process group. Outside Linux nothing kills
// CMD when distlock dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// guarded runs CMD itself: outside Linux there is no parent-death signal
// for a guard to act on.
func guarded(args []string) (string, []string) { return args[0], args[1:] }

// guardArg is never passed outside Linux.
const guardArg = "__distlock_guard"

func runGuard([]string) int { return 127 }
