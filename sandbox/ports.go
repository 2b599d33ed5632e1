package sandbox

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
)

// Ports for servers are taken below the kernel's ephemeral range. A port
// from 127.0.0.1:0 comes from that range, and between the moment it is
// found free and the moment the server binds it (or while a stopped server
// is down before a restart) any outgoing connection on the machine, such
// as another test's client, may be given it as its local port: the server
// then fails with "address already in use".
const (
	lowPort         = 10000 // the lowest port handed to a server
	ephemeralLowDef = 32768 // Linux's default when the range cannot be read
	portTries       = 200   // random ports tried before falling back to :0
)

// ephemeralLow returns the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return ephemeralLowDef
	}
	var lo, hi int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &lo, &hi); err != nil || lo <= lowPort {
		return ephemeralLowDef
	}
	return lo
}

// freePorts returns n distinct free TCP ports on 127.0.0.1, below the
// ephemeral range where it leaves room; they are free when returned and a
// server binds them a moment later (startLocal retries a start whose port
// was taken in between).
func freePorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	hi := ephemeralLow()
	for tries := 0; len(ports) < n && tries < portTries; tries++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", lowPort+rand.IntN(hi-lowPort)))
		if err != nil {
			continue // taken: try another
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for len(ports) < n { // the low range is crowded: let the kernel pick
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("sandbox: find a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// portTaken reports whether a server failed to start because a port it
// was given is in use.
func portTaken(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "address already in use")
}
