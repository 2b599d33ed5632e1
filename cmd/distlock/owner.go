package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// maxHostInOwner bounds the host part of a default owner id, so that the
// id stays well within the library's 128 bytes.
const maxHostInOwner = 64

// defaultOwner is the owner id run and hold acquire as without --owner:
// host:pid:random, so that status and list say which host and process hold
// a lock, while two processes never share an id (which would let one
// re-enter the other's lock).
func defaultOwner() string {
	host, _ := os.Hostname()
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return ownerID(host, os.Getpid(), hex.EncodeToString(b[:]))
}

// ownerID builds host:pid:random within the library's rules for owner ids
// (1 to 128 printable ASCII bytes, no spaces): a byte of host outside them
// becomes '_', ':' too (the separator), and host is cut to 64 bytes; an
// empty host reads "unknown-host".
func ownerID(host string, pid int, random string) string {
	var sb strings.Builder
	for i := 0; i < len(host) && sb.Len() < maxHostInOwner; i++ {
		c := host[i]
		if c < 0x21 || c > 0x7e || c == ':' {
			c = '_'
		}
		sb.WriteByte(c)
	}
	if sb.Len() == 0 {
		sb.WriteString("unknown-host")
	}
	return fmt.Sprintf("%s:%d:%s", sb.String(), pid, random)
}

// validOwner reports whether owner meets the library's rules for owner ids
// (WithOwner: 1 to 128 printable ASCII bytes, no spaces).
func validOwner(owner string) bool {
	if owner == "" || len(owner) > 128 {
		return false
	}
	for i := 0; i < len(owner); i++ {
		if owner[i] < 0x21 || owner[i] > 0x7e {
			return false
		}
	}
	return true
}
