//go:build unix

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// localSupported reports whether this system can run the local provider.
const localSupported = true

// signalGroup sends s to the whole process group pid (the server was
// started as a group leader). A group that is already gone is not an error.
func signalGroup(pid int, s groupSignal) error { return kill(-pid, s) }

// signalOne sends s to process pid only. A process that is already gone is
// not an error.
func signalOne(pid int, s groupSignal) error { return kill(pid, s) }

func kill(pid int, s groupSignal) error {
	sig := map[groupSignal]syscall.Signal{
		sigKill: syscall.SIGKILL,
		sigTerm: syscall.SIGTERM,
		sigStop: syscall.SIGSTOP,
		sigCont: syscall.SIGCONT,
		sigInt:  syscall.SIGINT,
	}[s]
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// runAs makes cmd run as the named user (with its primary group), for a
// server that refuses to run as root. cmd.SysProcAttr must be set.
func runAs(cmd *exec.Cmd, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return fmt.Errorf("user %s: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return fmt.Errorf("user %s: gid %q: %w", name, u.Gid, err)
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
	cmd.Env = append(cmd.Environ(), "HOME="+u.HomeDir, "USER="+name, "LOGNAME="+name)
	return nil
}

// chownTo gives paths to the named user and its primary group.
func chownTo(name string, paths ...string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := syscall.Chown(p, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// brokerProcAttr starts the container broker in its own process group,
// and without a parent-death signal: when the test process dies, the
// broker sees its stdin close and removes its containers first.
func brokerProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// lockPath takes an exclusive lock on the file at path (created if
// needed), waiting for another process's; the returned func releases it.
func lockPath(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
}
