package sqlbench

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// MySQL client/server protocol command bytes (the first payload byte of a
// packet with sequence number 0, sent by the client).
const (
	comQuit        = 0x01
	comQuery       = 0x03
	comPing        = 0x0e
	comStmtPrepare = 0x16
	comStmtExecute = 0x17
	comStmtClose   = 0x19
	comStmtReset   = 0x1a
	comSetOption   = 0x1b
)

// commandNames names the commands a report shows.
var commandNames = map[byte]string{
	comQuit: "QUIT", comQuery: "QUERY", comPing: "PING", comStmtPrepare: "PREPARE",
	comStmtExecute: "EXECUTE", comStmtClose: "CLOSE", comStmtReset: "RESET", comSetOption: "SET_OPTION",
}

// wire counts, per command byte, the commands clients send to the server
// through a countingProxy.
type wire struct {
	counts [256]atomic.Int64
}

// snapshot returns the counts so far.
func (w *wire) snapshot() [256]int64 {
	var out [256]int64
	for i := range w.counts {
		out[i] = w.counts[i].Load()
	}
	return out
}

// roundTrips returns the commands in counts that the server answers: every
// one but COM_STMT_CLOSE and COM_QUIT, which get no reply.
func roundTrips(counts [256]int64) int64 {
	var n int64
	for c, v := range counts {
		if c != comStmtClose && c != comQuit {
			n += v
		}
	}
	return n
}

// packetParser follows the client→server byte stream of one connection
// packet by packet (3-byte length, sequence number, payload), in whatever
// pieces it is written, and counts each command: a packet with sequence
// number 0 (the handshake response has 1, and so on).
type packetParser struct {
	w      *wire
	hdr    [4]byte
	nhdr   int // header bytes seen of the current packet
	remain int // payload bytes of the current packet still to come
	first  bool
}

func (p *packetParser) feed(b []byte) {
	for len(b) > 0 {
		if p.remain == 0 && p.nhdr < 4 {
			n := copy(p.hdr[p.nhdr:], b)
			p.nhdr += n
			b = b[n:]
			if p.nhdr < 4 {
				return
			}
			p.remain = int(p.hdr[0]) | int(p.hdr[1])<<8 | int(p.hdr[2])<<16
			p.first = p.hdr[3] == 0
			if p.remain == 0 {
				p.nhdr = 0
			}
			continue
		}
		if p.first {
			p.w.counts[b[0]].Add(1)
			p.first = false
		}
		n := min(p.remain, len(b))
		p.remain -= n
		b = b[n:]
		if p.remain == 0 {
			p.nhdr = 0
		}
	}
}

// countingProxy forwards loopback connections to a MySQL server and
// counts the commands clients send through it (see wire).
type countingProxy struct {
	ln     net.Listener
	target string
	w      wire
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startCountingProxy(target string) (*countingProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *countingProxy) addr() string { return p.ln.Addr().String() }

func (p *countingProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			pp := &packetParser{w: &p.w}
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					pp.feed(buf[:n])
					if _, werr := s.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = s.(*net.TCPConn).CloseWrite()
		}()
		go func() {
			defer p.wg.Done()
			_, err := io.Copy(c, s)
			if err != nil && !errors.Is(err, net.ErrClosed) {
				_ = c.Close()
			}
			_ = c.(*net.TCPConn).CloseWrite()
		}()
	}
}

// close stops the proxy and cuts every connection through it.
func (p *countingProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
