package sandbox

import (
	"errors"
	"testing"
)

// Server ports come from below the ephemeral range, where no outgoing
// connection of another test can be given one before the server binds it.
func TestFreePortsBelowEphemeral(t *testing.T) {
	ports, err := freePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	hi := ephemeralLow()
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d returned twice: %v", p, ports)
		}
		seen[p] = true
		if p < lowPort || p >= hi {
			t.Errorf("port %d outside [%d, %d)", p, lowPort, hi)
		}
	}
}

// Each server's message for a taken port is recognised, so the start is
// tried again on new ports.
func TestPortTaken(t *testing.T) {
	for _, msg := range []string{
		"[ERROR] Can't start server: Bind on TCP/IP port. Got error: 98: Address already in use",             // mariadbd
		"Warning: Could not create server TCP listening socket 127.0.0.1:6379: bind: Address already in use", // redis
		`listen tcp 127.0.0.1:2379: bind: address already in use`,                                            // etcd
		"java.net.BindException: Address already in use",                                                     // zookeeper
	} {
		if !portTaken(errors.New("server exited\n" + msg)) {
			t.Errorf("portTaken(%q) = false", msg)
		}
	}
	if portTaken(errors.New("server exited (exit status 1)")) || portTaken(nil) {
		t.Error("portTaken is true for an unrelated failure")
	}
}
