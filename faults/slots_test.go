//go:build linux

package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/memlock"
	"github.com/distlock/distlock/sandbox"
)

// startClient starts a client in slot i.
func (r *run) startClient(ctx context.Context, i int) (client, error) {
	r.gens[i]++
	prof, letter := r.slotProfile(i), "c"
	if prof == profileUser {
		letter = "u"
	}
	cfg := clientConfig{
		ID:       fmt.Sprintf("%s%d.%d", letter, i, r.gens[i]),
		Profile:  prof,
		Register: r.reg.URL(),
		Key:      r.key,
		TTL:      r.tg.ttl,
		Seed:     r.cfg.seed ^ uint64(i<<20|r.gens[i]),
		SemLimit: semLimit,
	}
	r.mu.Lock()
	r.profiles[cfg.ID] = prof
	r.mu.Unlock()
	if r.tg.spec == nil {
		return r.startMemClient(cfg)
	}
	var proxies []*sandbox.Proxy
	addrs := r.nodeAddrs()
	if !r.tg.noProxy {
		for n := range addrs {
			p, err := sandbox.StartProxy(func() string { return r.g.Node(n).Addr() })
			if err != nil {
				for _, p := range proxies {
					_ = p.Close()
				}
				return nil, err
			}
			proxies = append(proxies, p)
			addrs[n] = p.Addr()
		}
	}
	cfg.URL = r.tg.url(addrs)
	if prof == profileUser {
		cfg.Store, cfg.Addrs = userStore(r.tg), addrs
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFaultClient$", "-test.timeout=30m")
	cmd.Env = append(os.Environ(), cfg.env())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &procClient{r: r, cid: cfg.ID, cmd: cmd, stdin: stdin, proxies: proxies, done: make(chan struct{})}
	go p.read(stdout)
	return p, nil
}

type procClient struct {
	r       *run
	cid     string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	proxies []*sandbox.Proxy
	done    chan struct{}
	killed  atomic.Int64 // unix ns of the SIGKILL
}

func (p *procClient) id() string { return p.cid }

func (p *procClient) read(stdout io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var other, race []string
	inRace := false
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, recPrefix); ok {
			var x rec
			if json.Unmarshal([]byte(rest), &x) == nil {
				p.r.handle(x)
			}
			continue
		}
		// Keep the first data race report whole: the tail below would
		// cut it off.
		switch {
		case race == nil && strings.Contains(line, "WARNING: DATA RACE"):
			race, inRace = []string{line}, true
			continue
		case inRace && strings.HasPrefix(line, "=================="):
			race, inRace = append(race, line), false
			continue
		case inRace && len(race) < 400:
			race = append(race, line)
			continue
		}
		if line != "PASS" && line != "" {
			other = append(other, line)
		}
	}
	err := p.cmd.Wait()
	if at := p.killed.Load(); at != 0 {
		p.r.closeHold(p.cid, at, "killed")
	} else {
		p.r.closeHold(p.cid, time.Now().UnixNano(), "exited")
	}
	for _, pr := range p.proxies {
		p.r.dropped.Add(int64(pr.Dropped()))
		_ = pr.Close()
	}
	if err != nil && p.killed.Load() == 0 {
		if len(other) > 20 {
			other = other[len(other)-20:]
		}
		if race != nil {
			p.r.note(fmt.Sprintf("client %s: first data race report:\n\t%s", p.cid, strings.Join(race, "\n\t")))
		}
		p.r.note(fmt.Sprintf("client %s exited (%v):\n\t%s", p.cid, err, strings.Join(other, "\n\t")))
	}
}

func (p *procClient) signal(s syscall.Signal) { _ = p.cmd.Process.Signal(s) }
func (p *procClient) kill() {
	p.killed.CompareAndSwap(0, time.Now().UnixNano())
	p.signal(syscall.SIGKILL)
	<-p.done // the records written before the death are in, its hold closed
}
func (p *procClient) stop() { p.signal(syscall.SIGSTOP) }
func (p *procClient) cont() { p.signal(syscall.SIGCONT) }
func (p *procClient) partition() {
	for _, pr := range p.proxies {
		pr.Blackhole(sandbox.Both)
	}
}
func (p *procClient) heal() {
	for _, pr := range p.proxies {
		pr.Heal()
	}
}
func (p *procClient) dropNextReply() {
	for _, pr := range p.proxies {
		pr.DropNextReply()
	}
}
func (p *procClient) longHold() { _, _ = io.WriteString(p.stdin, "long\n") }
func (p *procClient) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
func (p *procClient) shutdown() {
	p.signal(syscall.SIGCONT)
	_ = p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.kill()
	}
}

// memClient: mem's store lives in this process, so its clients do too:
// goroutines with a driver each. Kill is the driver's Kill (its locks stay
// until their TTL), partition is the driver's Partition.
type memClient struct {
	cid    string
	drv    *memlock.Driver
	l      *distlock.Locker
	cancel context.CancelFunc
	done   chan struct{}
	tr     *http.Transport
	r      *run
	long   atomic.Bool
}

func (r *run) startMemClient(cfg clientConfig) (client, error) {
	d, err := r.mem.NewDriver(nil)
	if err != nil {
		return nil, err
	}
	var bd backend.Driver = d
	if r.tg.wrap != nil {
		bd = r.tg.wrap(d)
	}
	l := distlock.New(bd, distlock.WithDefaultTTL(cfg.TTL))
	ctx, cancel := context.WithCancel(context.Background())
	m := &memClient{cid: cfg.ID, drv: d, l: l, cancel: cancel, done: make(chan struct{}), tr: &http.Transport{}, r: r}
	go func() {
		defer close(m.done)
		runClient(ctx, cfg, l, &http.Client{Transport: m.tr, Timeout: 10 * time.Second}, r.handle, &m.long)
	}()
	return m, nil
}

func (m *memClient) id() string { return m.cid }
func (m *memClient) kill() {
	at := time.Now().UnixNano()
	m.drv.Kill()
	m.r.closeHold(m.cid, at, "killed")
	m.end()
}
func (m *memClient) end() {
	m.cancel()
	<-m.done
	_ = m.l.Close()
	m.tr.CloseIdleConnections()
	m.r.closeHold(m.cid, time.Now().UnixNano(), "exited")
}
func (m *memClient) stop()          {}
func (m *memClient) cont()          {}
func (m *memClient) partition()     { m.drv.Partition(0) }
func (m *memClient) heal()          { m.drv.Heal() }
func (m *memClient) dropNextReply() {}
func (m *memClient) longHold()      { m.long.Store(true) }
func (m *memClient) shutdown()      { m.end() }
func (m *memClient) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}
