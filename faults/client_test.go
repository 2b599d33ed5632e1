//go:build linux

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	_ "github.com/distlock/distlock/etcdlock"
	_ "github.com/distlock/distlock/redislock"
	_ "github.com/distlock/distlock/sqllock"
	_ "github.com/distlock/distlock/zklock"
)

// A client does read-modify-write cycles on the register under the lock,
// and reports what it did as records: the answer times of its register
// operations, and the holds it believed it had.

// rec is one record a client reports (a line "FAULTREC {json}" on a child
// process's stdout).
type rec struct {
	T   string `json:"t"` // "ret": an op answered; "hold": acquired; "dl": the lease's deadline; "end": the hold ended
	C   string `json:"c"`
	S   int64  `json:"s,omitempty"`
	At  int64  `json:"at,omitempty"`
	Tok uint64 `json:"tok,omitempty"`
	Own string `json:"own,omitempty"`
	Cut string `json:"cut,omitempty"`
}

const recPrefix = "FAULTREC "

type clientConfig struct {
	ID       string        `json:"id"`
	URL      string        `json:"url"`
	Register string        `json:"register"`
	Key      string        `json:"key"`
	TTL      time.Duration `json:"ttl"`
	Seed     uint64        `json:"seed"`
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
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	octx, ocancel := context.WithTimeout(ctx, 30*time.Second)
	l, err := distlock.Open(octx, cfg.URL)
	ocancel()
	if err != nil {
		t.Fatalf("open %s: %v", cfg.URL, err)
	}
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
	runClient(ctx, cfg, l, &http.Client{Transport: tr, Timeout: 10 * time.Second}, emit)
}

// runClient runs cycles until ctx ends: acquire, 1-3 fenced
// read-modify-writes with jitter, release.
func runClient(ctx context.Context, cfg clientConfig, l *distlock.Locker, hc *http.Client, emit func(rec)) {
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
	jitter := func(max time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(rng.Int64N(int64(max)))):
		}
	}
	for ctx.Err() == nil {
		actx, cancel := context.WithTimeout(ctx, 5*cfg.TTL)
		le, err := l.Acquire(actx, cfg.Key)
		cancel()
		if err != nil {
			jitter(100 * time.Millisecond)
			continue
		}
		start := time.Now()
		doneAt := make(chan time.Time, 1)
		go func() { <-le.Done(); doneAt <- time.Now() }()
		emit(rec{T: "hold", C: cfg.ID, At: start.UnixNano(), Tok: le.Token(), Own: le.Owner()})
		emit(rec{T: "dl", C: cfg.ID, At: le.Deadline().UnixNano()})
		rounds := 1 + rng.IntN(3)
		cut := "release"
		for range rounds {
			if le.Context().Err() != nil {
				break
			}
			r, ok := op(false, le.Token(), le.Owner(), 0)
			if !ok || !r.OK {
				break
			}
			jitter(20 * time.Millisecond)
			if le.Context().Err() != nil {
				break
			}
			if w, ok := op(true, le.Token(), le.Owner(), r.V+1); !ok || !w.OK {
				break
			}
			emit(rec{T: "dl", C: cfg.ID, At: le.Deadline().UnixNano()})
		}
		end := time.Now()
		select {
		case at := <-doneAt:
			end, cut = at, "lost"
		default:
		}
		if dl := le.Deadline(); dl.Before(end) {
			end, cut = dl, cut+"/deadline"
		}
		emit(rec{T: "end", C: cfg.ID, At: end.UnixNano(), Tok: le.Token(), Own: le.Owner(), Cut: cut})
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = le.Release(rctx)
		rcancel()
		jitter(20 * time.Millisecond)
	}
}

func (c clientConfig) env() string {
	b, _ := json.Marshal(c)
	return fmt.Sprintf("%s=%s", childEnv, b)
}
