package zklock

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// connectResponse is a connect response frame granting timeoutMs.
func connectResponse(timeoutMs int32) []byte {
	body := make([]byte, 4+4+8+4+16+1)
	binary.BigEndian.PutUint32(body[4:8], uint32(timeoutMs))
	binary.BigEndian.PutUint32(body[16:20], 16)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return append(frame, body...)
}

func request(opcode int32) []byte {
	p := binary.BigEndian.AppendUint32(nil, 8)
	p = binary.BigEndian.AppendUint32(p, 7)
	return binary.BigEndian.AppendUint32(p, uint32(opcode))
}

// TestSessionConn: the wrapper reads the granted timeout from the connect
// response, and while the driver has watches it holds back the first reply
// on a new connection until setWatches was written.
func TestSessionConn(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	s := &session{asked: 10 * time.Second}
	s.watches.Add(1)
	c, err := s.wrap(func(string, string, time.Duration) (net.Conn, error) { return client, nil })("tcp", "x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		_, _ = server.Write(connectResponse(4000))
		_, _ = server.Write([]byte{0, 0, 0, 1, 42}) // a reply
	}()
	// The handshake, read the way go-zookeeper reads it.
	buf := make([]byte, 64)
	if _, err := io.ReadFull(c, buf[:4]); err != nil {
		t.Fatal(err)
	}
	n := int(binary.BigEndian.Uint32(buf[:4]))
	if _, err := io.ReadFull(c, buf[:n]); err != nil {
		t.Fatal(err)
	}
	if got := s.timeout(); got != 4*time.Second {
		t.Errorf("granted timeout = %v, want 4s", got)
	}
	read := make(chan time.Time, 1)
	go func() {
		_, _ = io.ReadFull(c, buf[:5])
		read <- time.Now()
	}()
	time.Sleep(100 * time.Millisecond)
	go func() { _, _ = io.ReadFull(server, make([]byte, 12)) }()
	wrote := time.Now()
	if _, err := c.Write(request(opSetWatches)); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-read:
		if at.Before(wrote) {
			t.Error("a reply was delivered before setWatches was written")
		}
	case <-time.After(gateTimeout / 2):
		t.Fatal("the reply was not delivered after setWatches was written")
	}
}

// TestSessionConnStaleSetWatches: a setWatches request made for a
// connection that died unsent goes out first on the next connection; it must
// not open that connection's gate.
func TestSessionConnStaleSetWatches(t *testing.T) {
	s := &session{asked: 10 * time.Second}
	s.watches.Add(1)
	handshake := func() (*sessionConn, net.Conn) {
		client, server := net.Pipe()
		c, _ := s.wrap(func(string, string, time.Duration) (net.Conn, error) { return client, nil })("tcp", "x", time.Second)
		go func() { _, _ = server.Write(connectResponse(4000)) }()
		buf := make([]byte, 64)
		_, _ = io.ReadFull(c, buf[:4])
		_, _ = io.ReadFull(c, buf[:int(binary.BigEndian.Uint32(buf[:4]))])
		go func() { _, _ = io.Copy(io.Discard, server) }()
		return c.(*sessionConn), server
	}
	c1, s1 := handshake() // armed; dies before its setWatches is written
	_ = c1.Close()
	_ = s1.Close()
	c2, s2 := handshake()
	defer c2.Close()
	defer s2.Close()
	isOpen := func() bool {
		select {
		case <-c2.gate:
			return true
		default:
			return false
		}
	}
	if _, err := c2.Write(request(opSetWatches)); err != nil { // the stale one
		t.Fatal(err)
	}
	if isOpen() {
		t.Fatal("the stale setWatches request opened the new connection's gate")
	}
	if _, err := c2.Write(request(opSetWatches)); err != nil { // its own
		t.Fatal(err)
	}
	if !isOpen() {
		t.Fatal("the connection's own setWatches request did not open its gate")
	}

	// A setWatches request that fails unsent (the connection is closing)
	// is reported through the logger and opens the gate too.
	c3, s3 := handshake()
	defer c3.Close()
	defer s3.Close()
	s.Printf("Failed to set previous watches: %v", "zk: connection closed")
	select {
	case <-c3.gate:
	default:
		t.Fatal("a failed setWatches request did not open the gate")
	}
}

// TestGrantedTimeout: the lease TTL follows the session timeout the
// server granted, not the one asked for (the sandbox grants 500ms to 60s):
// 5/12 of it (see vouchNum).
func TestGrantedTimeout(t *testing.T) {
	c := startCluster(t, 1)
	addr := c.g.Addrs()[0]
	for _, tc := range []struct {
		ask  string
		want time.Duration
	}{{"100ms", 500 * time.Millisecond}, {"90s", 60 * time.Second}, {"3s", 3 * time.Second}} {
		l, err := distlock.Open(ctxFor(t, 30*time.Second), "zk://"+addr+"/granted?session_timeout="+tc.ask)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		d := l.Driver().(*Driver)
		if got := d.timeout(); got != tc.want {
			t.Errorf("asked %s: driver TTL %v, want the granted %v", tc.ask, got, tc.want)
		}
		if tc.want > time.Second {
			le, err := l.Acquire(ctxFor(t, 10*time.Second), uniqueKey(t), distlock.WithTTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			valid := tc.want * vouchNum / vouchDen
			if left := time.Until(le.Deadline()); left < valid*9/10 || left > valid {
				t.Errorf("asked %s: lease valid for %v more, want about %v (5/12 of the granted %v)", tc.ask, left, valid, tc.want)
			}
			_ = le.Release(ctxFor(t, 10*time.Second))
		}
		_ = l.Close()
	}
}
