//go:build linux

package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	_ "github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/faults/internal/check"
	_ "github.com/distlock/distlock/redislock"
	_ "github.com/distlock/distlock/redlock"
	_ "github.com/distlock/distlock/sqllock"
	_ "github.com/distlock/distlock/zklock"
)

// A client does read-modify-write cycles on the register under the lock,
// and, where the store offers them, takes and releases permits of a
// semaphore and both sides of a read-write lock (all three named by the
// same key, which names three independent things), each in a loop of its
// own. It reports what it did as records: the answer times of its
// register operations, and the holds it believed it had.
//
// A client has a profile: "open" clients make their Locker with
// distlock.Open from a URL, "user" clients over a store client made the
// way a service makes it, with the client library's defaults (user_test.go).
// On request (a "long" line on its stdin, sent before a stall fault) a
// client's next lock hold is a long one: it keeps the lease, renewed by
// the watchdog, doing a read-modify-write every quarter TTL until it
// learns the lease is lost, so that a stall of its store reaches a holder
// with a renewal in flight.

// rec is one record a client reports (a line "FAULTREC {json}" on a child
// process's stdout).
type rec struct {
	T    string `json:"t"` // "ret": an op answered; "hold": acquired; "dl": the lease's deadline; "end": the hold ended; "prims": what the client drives
	C    string `json:"c"`
	S    int64  `json:"s,omitempty"`
	At   int64  `json:"at,omitempty"`
	Tok  uint64 `json:"tok,omitempty"`
	Own  string `json:"own,omitempty"`
	Cut  string `json:"cut,omitempty"`
	P    string `json:"p,omitempty"`    // the hold's kind (check.Lock, Sem, Read, Write)
	N    int    `json:"n,omitempty"`    // hold: the permits held; prims: the semaphore's limit (0: none)
	Call int64  `json:"call,omitempty"` // hold: when the acquisition was called
	RW   bool   `json:"rw,omitempty"`   // prims: the client drives the read-write lock
	L    bool   `json:"l,omitempty"`    // hold: a long hold (asked for by a stall)
	Dl   int64  `json:"dl,omitempty"`   // end: the lease's Deadline() then
	Bel  int64  `json:"bel,omitempty"`  // end: when the client stopped believing it held (Release call or Done seen), not cut at Dl
}

const recPrefix = "FAULTREC "

type clientConfig struct {
	ID       string        `json:"id"`
	URL      string        `json:"url"`
	Register string        `json:"register"`
	Key      string        `json:"key"`
	TTL      time.Duration `json:"ttl"`
	Seed     uint64        `json:"seed"`
	SemLimit int           `json:"sem_limit"`
	// Profile is "open" (distlock.Open(URL)) or "user" (a store client
	// made with its library's defaults over Addrs, passed to the
	// package's New; Store names which).
	Profile string   `json:"profile"`
	Store   string   `json:"store,omitempty"`
	Addrs   []string `json:"addrs,omitempty"`
}

const childEnv = "DISTLOCK_FAULTS_CHILD"

// TestHelperFaultClient is a client process of TestFaults: it runs one
// client until its stdin closes.
func TestHelperFaultClient(t *testing.T) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		t.Skip("only runs as a client process of TestFaults")
	}
	var cfg clientConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var long atomic.Bool
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "long" {
				long.Store(true)
			}
		}
		cancel()
	}()
	octx, ocancel := context.WithTimeout(ctx, 30*time.Second)
	var l *distlock.Locker
	var err error
	closeStore := func() {}
	if cfg.Profile == profileUser {
		l, closeStore, err = userLocker(octx, cfg)
	} else {
		l, err = distlock.Open(octx, cfg.URL)
	}
	ocancel()
	if err != nil {
		t.Fatalf("%s client over %s: %v", cfg.Profile, cfg.URL, err)
	}
	defer closeStore() // after the Locker's Close (deferred below, so run first)
	defer l.Close()
	var mu sync.Mutex
	emit := func(r rec) {
		b, _ := json.Marshal(r)
		mu.Lock()
		defer mu.Unlock()
		_, _ = os.Stdout.Write(append(append([]byte(recPrefix), b...), '\n'))
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	runClient(ctx, cfg, l, &http.Client{Transport: tr, Timeout: 10 * time.Second}, emit, &long)
}

// runClient runs the client's loops until ctx ends: the lock's, and the
// semaphore's and the read-write lock's where the store offers them.
// long, when set, asks for a long lock hold (it is cleared when taken).
func runClient(ctx context.Context, cfg clientConfig, l *distlock.Locker, hc *http.Client, emit func(rec), long *atomic.Bool) {
	prims := rec{T: "prims", C: cfg.ID}
	sem, err := l.Semaphore(cfg.Key, cfg.SemLimit)
	if !errors.Is(err, distlock.ErrUnsupported) {
		prims.N = cfg.SemLimit // another error: no grants, which the progress check reports
	}
	rw, rwErr := l.RWMutex(cfg.Key)
	prims.RW = !errors.Is(rwErr, distlock.ErrUnsupported)
	emit(prims)
	var wg sync.WaitGroup
	if err == nil {
		wg.Go(func() { runSemaphore(ctx, cfg, sem, emit) })
	}
	if rwErr == nil {
		wg.Go(func() { runRW(ctx, cfg, rw, emit) })
	}
	runLock(ctx, cfg, l, hc, emit, long)
	wg.Wait()
}

// pause waits up to max (random), or until ctx ends.
func pause(ctx context.Context, rng *rand.Rand, max time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(rng.Int64N(int64(max)))):
	}
}

// A holding reports one hold: "hold" when the lease is granted, "dl"
// with its deadline, "end" when it ends (at the release call, the loss
// the client observed, or the lease's deadline, whichever came first),
// with the deadline and the moment the client stopped believing it held
// (the release call or the loss it observed, not cut at the deadline:
// the checker's late-loss rule compares the two).
type holding struct {
	emit   func(rec)
	id     string
	kind   string
	le     *distlock.Lease
	doneAt chan time.Time
}

func startHold(emit func(rec), id, kind string, call time.Time, le *distlock.Lease, long bool) *holding {
	start := time.Now()
	h := &holding{emit: emit, id: id, kind: kind, le: le, doneAt: make(chan time.Time, 1)}
	go func() { <-le.Done(); h.doneAt <- time.Now() }()
	emit(rec{T: "hold", C: id, P: kind, N: le.Permits(), Call: call.UnixNano(), At: start.UnixNano(), Tok: le.Token(), Own: le.Owner(), L: long})
	h.deadline()
	return h
}

// deadline reports the lease's current validity deadline.
func (h *holding) deadline() {
	h.emit(rec{T: "dl", C: h.id, P: h.kind, At: h.le.Deadline().UnixNano()})
}

// end reports the hold's end, then releases the lease.
func (h *holding) end() {
	now := time.Now()
	bel, cut := now, "release"
	select {
	case <-h.le.Done():
		// Its watcher stamps the moment it saw Done close (at most now,
		// though it may be scheduled after this select).
		if at := <-h.doneAt; at.Before(now) {
			bel = at
		}
		cut = "lost"
	default:
	}
	dl := h.le.Deadline()
	end := bel
	if dl.Before(end) {
		end, cut = dl, cut+"/deadline"
	}
	h.emit(rec{T: "end", C: h.id, P: h.kind, At: end.UnixNano(), Tok: h.le.Token(), Own: h.le.Owner(), Cut: cut, Dl: dl.UnixNano(), Bel: bel.UnixNano()})
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = h.le.Release(rctx)
	rcancel()
}

// hold keeps le for up to max (random), less if it is lost or ctx ends.
func hold(ctx context.Context, rng *rand.Rand, le *distlock.Lease, max time.Duration) {
	select {
	case <-ctx.Done():
	case <-le.Context().Done():
	case <-time.After(time.Duration(rng.Int64N(int64(max)))):
	}
}

// runLock runs cycles until ctx ends: acquire, 1-3 fenced
// read-modify-writes with jitter, release; or, when long is set, a long
// hold: a read-modify-write every quarter TTL while the lease lasts (at
// most longHoldMax).
func runLock(ctx context.Context, cfg clientConfig, l *distlock.Locker, hc *http.Client, emit func(rec), long *atomic.Bool) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	var seq int64
	op := func(write bool, tok uint64, owner string, in int64) (opResp, bool) {
		seq++
		q := opReq{C: cfg.ID, S: seq, W: write, Tok: tok, Own: owner, In: in, Call: time.Now().UnixNano()}
		b, _ := json.Marshal(q)
		resp, err := hc.Post(cfg.Register, "application/json", bytes.NewReader(b))
		if err != nil {
			return opResp{}, false
		}
		defer resp.Body.Close()
		var out opResp
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return opResp{}, false
		}
		emit(rec{T: "ret", C: cfg.ID, S: seq, At: time.Now().UnixNano()})
		return out, true
	}
	for ctx.Err() == nil {
		call := time.Now()
		actx, cancel := context.WithTimeout(ctx, 5*cfg.TTL)
		le, err := l.Acquire(actx, cfg.Key)
		cancel()
		if err != nil {
			pause(ctx, rng, 100*time.Millisecond)
			continue
		}
		isLong := long.CompareAndSwap(true, false)
		h := startHold(emit, cfg.ID, check.Lock, call, le, isLong)
		// rmw reports whether the lease is still believed held and the
		// register accepted the cycle.
		rmw := func() bool {
			if le.Context().Err() != nil {
				return false
			}
			r, ok := op(false, le.Token(), le.Owner(), 0)
			if !ok || !r.OK {
				return false
			}
			pause(ctx, rng, 20*time.Millisecond)
			if le.Context().Err() != nil {
				return false
			}
			if w, ok := op(true, le.Token(), le.Owner(), r.V+1); !ok || !w.OK {
				return false
			}
			h.deadline()
			return true
		}
		if isLong {
			// The long hold lasts until the lease says it is lost: a
			// register that refuses its token (fencing caught a holder
			// whose lease ran out) does not end it, so the hold shows
			// how long the client went on believing.
			until := time.After(longHoldMax(cfg.TTL))
		long:
			for le.Context().Err() == nil {
				rmw()
				select {
				case <-ctx.Done():
					break long
				case <-until:
					break long
				case <-le.Context().Done():
					break long
				case <-time.After(cfg.TTL / 4):
				}
			}
		} else {
			for range 1 + rng.IntN(3) {
				if !rmw() {
					break
				}
			}
		}
		h.end()
		pause(ctx, rng, 20*time.Millisecond)
	}
}

// runSemaphore runs cycles until ctx ends: acquire 1 permit (2 one time
// in three), hold them 0-40 ms, release.
func runSemaphore(ctx context.Context, cfg clientConfig, sem *distlock.Semaphore, emit func(rec)) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 8))
	for ctx.Err() == nil {
		n := 1
		if rng.IntN(3) == 0 {
			n = min(2, sem.Limit())
		}
		call := time.Now()
		actx, cancel := context.WithTimeout(ctx, 5*cfg.TTL)
		le, err := sem.AcquireN(actx, n)
		cancel()
		if err != nil {
			pause(ctx, rng, 100*time.Millisecond)
			continue
		}
		h := startHold(emit, cfg.ID, check.Sem, call, le, false)
		hold(ctx, rng, le, 40*time.Millisecond)
		h.end()
		pause(ctx, rng, 20*time.Millisecond)
	}
}

// runRW runs cycles until ctx ends: take the write side (three times in
// ten) or the read side, hold it 0-40 ms, release.
func runRW(ctx context.Context, cfg clientConfig, rw *distlock.RWMutex, emit func(rec)) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 9))
	for ctx.Err() == nil {
		write := rng.IntN(10) < 3
		call := time.Now()
		actx, cancel := context.WithTimeout(ctx, 5*cfg.TTL)
		var le *distlock.Lease
		var err error
		if write {
			le, err = rw.Lock(actx)
		} else {
			le, err = rw.RLock(actx)
		}
		cancel()
		if err != nil {
			pause(ctx, rng, 100*time.Millisecond)
			continue
		}
		kind := check.Read
		if write {
			kind = check.Write
		}
		h := startHold(emit, cfg.ID, kind, call, le, false)
		hold(ctx, rng, le, 40*time.Millisecond)
		h.end()
		pause(ctx, rng, 20*time.Millisecond)
	}
}

// longHoldMax bounds a long hold: past a stall (at most TTL + 1.5 s) and
// the lease's loss it causes, with room to spare.
func longHoldMax(ttl time.Duration) time.Duration { return 4 * ttl }

func (c clientConfig) env() string {
	b, _ := json.Marshal(c)
	return fmt.Sprintf("%s=%s", childEnv, b)
}
