package sandbox

import (
	"bytes"
	"io"
	"net"
	"sync"
	"time"
)

// link is one proxied connection.
type link struct {
	client, server *net.TCPConn
	done           chan struct{} // closed when the link ends
	once           sync.Once

	downMu    sync.Mutex // held while forwarding a reply, and while sending a request whose reply is to be lost
	drop      bool       // guarded by downMu: reply bytes are to be lost
	dropReq   []byte     // guarded by downMu: the request whose reply is lost
	dropUntil func(request, reply []byte) bool
	dropAt    time.Time

	mu       sync.Mutex
	draining bool // the server side belongs to the reply-loss drain
}

// accept serves the listener until Close.
func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		if p.refusing {
			p.mu.Unlock()
			_ = c.(*net.TCPConn).SetLinger(0) // a reset, not an orderly close
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		resets := p.resets
		p.mu.Unlock()
		go p.serve(c.(*net.TCPConn), resets)
	}
}

// serve dials the target for client and forwards both ways until the
// connection ends. resets is Reset's count when client was accepted: a
// Reset (or Refuse) that came while the target was being dialled ends the
// connection too, or a client the test cut off would get through.
func (p *Proxy) serve(client *net.TCPConn, resets uint64) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: proxyDialTimeout}
	sc, err := d.DialContext(p.ctx, "tcp", p.target())
	if err != nil {
		_ = client.SetLinger(0) // as a connection refused further on
		_ = client.Close()
		return
	}
	l := &link{client: client, server: sc.(*net.TCPConn), done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.refusing || p.resets != resets {
		p.mu.Unlock()
		l.abort()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(l, Upstream) })
	wg.Go(func() { p.pipe(l, Downstream) })
	wg.Wait()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// pipe forwards one direction of l until either side ends.
func (p *Proxy) pipe(l *link, dir Direction) {
	src := l.client
	if dir == Downstream {
		src = l.server
	}
	buf := make([]byte, proxyChunk)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass(l, dir) {
				return
			}
			if dir == Upstream {
				if !p.forwardRequest(l, buf[:n]) {
					return
				}
			} else if !p.forwardReply(l, buf[:n]) {
				return
			}
		}
		if err != nil {
			l.shut()
			return
		}
	}
}

// forwardRequest sends a client chunk to the server, arming l's reply loss
// if the chunk is the one DropNextReply waits for.
func (p *Proxy) forwardRequest(l *link, chunk []byte) bool {
	p.mu.Lock()
	claim := p.dropMatch != nil && p.dropMatch(chunk)
	until := p.dropUntil
	if claim {
		p.dropMatch, p.dropUntil = nil, nil
	}
	p.mu.Unlock()
	if !claim {
		if _, err := l.server.Write(chunk); err != nil {
			l.shut()
			return false
		}
		return true
	}
	// No reply bytes may pass between arming and the request being sent.
	l.downMu.Lock()
	l.drop, l.dropReq, l.dropUntil, l.dropAt = true, bytes.Clone(chunk), until, time.Now()
	_, err := l.server.Write(chunk)
	l.downMu.Unlock()
	if err != nil {
		l.shut()
		return false
	}
	return true
}

// forwardReply sends a server chunk to the client, or loses it (and what
// follows) if l's reply loss is armed.
func (p *Proxy) forwardReply(l *link, chunk []byte) bool {
	l.downMu.Lock()
	if !l.drop {
		_, err := l.client.Write(chunk)
		l.downMu.Unlock()
		if err != nil {
			l.shut()
			return false
		}
		return true
	}
	end := l.dropUntil == nil || l.dropUntil(l.dropReq, chunk) || time.Since(l.dropAt) > proxyReplyWait
	l.downMu.Unlock()
	if !end {
		return true // background traffic: lost too, the reply still to come
	}
	p.mu.Lock()
	p.dropped++
	p.mu.Unlock()
	l.dropReply()
	return false
}

// pass waits while dir is held, then for the added latency. It returns
// false if the link or the proxy ended meanwhile.
func (p *Proxy) pass(l *link, dir Direction) bool {
	for {
		p.mu.Lock()
		held := (dir == Upstream && p.holdUp) || (dir == Downstream && p.holdDown)
		healed, lat := p.healed, p.latency
		p.mu.Unlock()
		if !held {
			if lat <= 0 {
				return true
			}
			t := time.NewTimer(lat)
			defer t.Stop()
			select {
			case <-t.C:
				return true
			case <-l.done:
				return false
			case <-p.done:
				return false
			}
		}
		select {
		case <-healed:
		case <-l.done:
			return false
		case <-p.done:
			return false
		}
	}
}

// shut ends l: both sides closed (the server's side left to the reply-loss
// drain if one runs).
func (l *link) shut() {
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		l.mu.Lock()
		draining := l.draining
		l.mu.Unlock()
		if !draining {
			_ = l.server.Close()
		}
	})
}

// abort resets both sides of l at once.
func (l *link) abort() {
	_ = l.client.SetLinger(0)
	_ = l.server.SetLinger(0)
	l.shut()
	_ = l.client.Close()
	_ = l.server.Close() // also ends a drain
}

// dropReply closes the client's side and lets the server finish: it is
// sent a FIN, its bytes are read and discarded until it closes or 2 s
// pass, then its side is closed. Run by the downstream pipe, which then
// returns.
func (l *link) dropReply() {
	l.mu.Lock()
	l.draining = true
	l.mu.Unlock()
	l.shut()
	_ = l.server.CloseWrite()
	_ = l.server.SetReadDeadline(time.Now().Add(proxyDrainTimeout))
	_, _ = io.Copy(io.Discard, l.server)
	_ = l.server.Close()
}
