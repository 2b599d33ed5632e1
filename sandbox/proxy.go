package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// Direction selects which bytes of a [Proxy] connection a fault applies to.
type Direction int

const (
	// Both directions.
	Both Direction = iota
	// Upstream: bytes from the client to the server.
	Upstream
	// Downstream: bytes from the server to the client.
	Downstream
)

func (d Direction) String() string {
	switch d {
	case Both:
		return "both"
	case Upstream:
		return "upstream"
	case Downstream:
		return "downstream"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// Proxy timings. Every wait of the proxy is bounded by one of these or by a
// connection or the proxy closing.
const (
	proxyDialTimeout  = 5 * time.Second
	proxyDrainTimeout = 2 * time.Second // a dropped reply's server side: wait for the server to close
	proxyReplyWait    = 5 * time.Second // DropReply: longest wait for the matching reply
	proxyChunk        = 32 << 10
)

// A Proxy is a fault-injecting TCP proxy on a loopback port, run in the
// test process. It forwards each connection it accepts to the address its
// target function returns at that moment (a container's mapped port
// changes when the container is started again, so the target is asked per
// connection), in both providers. Put one between a client and a server
// (dial Addr instead of the server) and cut, delay, reset or refuse that
// path, or lose one reply.
//
// Bytes are forwarded in chunks as they are read (at most 32 KiB each):
// a fault applies to whole chunks. Every method is safe for concurrent use
// and returns at once, except Close.
type Proxy struct {
	target func() string
	addr   string
	ctx    context.Context // canceled by Close: ends dials
	cancel context.CancelFunc
	done   chan struct{} // closed by Close

	mu        sync.Mutex
	ln        net.Listener
	refusing  bool   // new connections are reset at once
	resets    uint64 // Reset calls: a connection accepted before one is reset by it
	holdUp    bool
	holdDown  bool
	healed    chan struct{} // closed while nothing is held; replaced when a hold begins
	latency   time.Duration
	dropMatch func([]byte) bool // armed reply loss: the request it applies to; nil when unarmed
	dropUntil func(request, reply []byte) bool
	dropped   int
	links     map[*link]struct{}
	closed    bool

	wg sync.WaitGroup
}

// StartProxy listens on a free 127.0.0.1 port and forwards every connection
// it accepts to target(), asked once per connection.
func StartProxy(target func() string) (*Proxy, error) {
	if target == nil {
		return nil, errors.New("sandbox: proxy: nil target")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sandbox: proxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	healed := make(chan struct{})
	close(healed)
	p := &Proxy{
		target: target, addr: ln.Addr().String(), ctx: ctx, cancel: cancel,
		done: make(chan struct{}), ln: ln, healed: healed, links: map[*link]struct{}{},
	}
	p.wg.Add(1)
	go p.accept(ln)
	return p, nil
}

// StartProxyT is StartProxy for a test: it fails the test if the proxy
// cannot start and closes the proxy in t.Cleanup.
func StartProxyT(t testing.TB, target func() string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Addr is the proxy's host:port; it stays the same for the proxy's life.
func (p *Proxy) Addr() string { return p.addr }

// Blackhole holds back the bytes sent in dir, on current connections and
// on new ones, until Heal: nothing is refused or closed, a chunk in flight
// waits in the proxy and the rest in the kernels' buffers (TCP flow
// control), as a partition does to packets TCP keeps retransmitting. After
// Heal they are delivered, in order, on connections nobody closed meanwhile.
func (p *Proxy) Blackhole(dir Direction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.holdUp && !p.holdDown {
		p.healed = make(chan struct{})
	}
	p.holdUp = p.holdUp || dir == Both || dir == Upstream
	p.holdDown = p.holdDown || dir == Both || dir == Downstream
}

// Latency delays every chunk, in both directions, by d until Heal.
func (p *Proxy) Latency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = max(d, 0)
}

// Reset closes every current connection at once, with an RST to both the
// client and the server (SO_LINGER 0); bytes held by the proxy are lost.
// New connections are accepted as before.
func (p *Proxy) Reset() {
	p.mu.Lock()
	p.resets++
	links := p.currentLinks()
	p.mu.Unlock()
	abortAll(links)
}

// currentLinks returns the connections open now; p.mu is held.
func (p *Proxy) currentLinks() []*link {
	return slices.Collect(maps.Keys(p.links))
}

// abortAll resets every connection of links (see link.abort).
func abortAll(links []*link) {
	for _, l := range links {
		l.abort()
	}
}

// Refuse(true) resets every new connection as soon as it is made, as a
// port no process listens on would refuse it; current connections carry
// on. Refuse(false) and Heal accept connections again. The proxy keeps
// listening meanwhile: a port it closed could be given to another socket
// (another test's proxy or server), through which a client the test
// "killed" would reach a live server again.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = on
}

// DropNextReply loses one reply: the next chunk any client sends through
// the proxy is delivered to the server, and the server's bytes that follow
// on that connection are discarded. The client's side of that connection
// is then closed (the client reads EOF, as from a peer or a proxy that
// closed the connection), and the server's side is closed only after the
// server has been sent a FIN and had up to 2 s to finish (so the request
// surely runs: no RST can discard it in the server's kernel). The client
// sees a failed call whose effect happened; its own retry policy applies.
// It returns at once; Dropped counts the replies lost.
func (p *Proxy) DropNextReply() { p.DropReply(nil, nil) }

// DropReply is DropNextReply for a store's own protocol: the loss applies
// to the next client chunk for which request returns true (nil: any), and
// server bytes after it are discarded until the first chunk for which
// reply(req, chunk) returns true (nil: the first chunk), which is
// discarded too before the connection is closed as DropNextReply does.
// So background traffic (pings, keep-alives, flow control) neither takes
// the loss nor ends it early. If no reply matches within 5 s, the next
// server chunk ends it anyway. The functions must not keep their
// arguments.
func (p *Proxy) DropReply(request func(chunk []byte) bool, reply func(request, chunk []byte) bool) {
	if request == nil {
		request = func([]byte) bool { return true }
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropMatch, p.dropUntil = request, reply
}

// Dropped reports how many replies were lost so far.
func (p *Proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// Heal ends Blackhole (held bytes flow again), Latency and Refuse. An
// armed DropNextReply stays armed.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holdUp || p.holdDown {
		close(p.healed)
	}
	p.holdUp, p.holdDown = false, false
	p.latency = 0
	p.refusing = false
}

// Close stops listening, closes every connection and waits for every
// goroutine of the proxy. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	p.cancel()
	_ = p.ln.Close()
	links := p.currentLinks()
	p.mu.Unlock()
	abortAll(links)
	p.wg.Wait()
	return nil
}

func (p *Proxy) String() string { return "proxy " + p.addr }
