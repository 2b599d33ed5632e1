//go:build !linux

package main

import "syscall"

// childAttr puts CMD in its own process group. Outside Linux nothing kills
// CMD when distlock dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
