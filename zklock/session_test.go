package zklock

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
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
