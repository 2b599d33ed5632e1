//go:build linux

package faults

import (
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/distlock/distlock/faults/internal/check"
)

// The fenced resource: one register served over loopback HTTP by the test
// process. Reads and writes both present the lease's token and owner and
// are accepted only if the token is greater than the register's last, or
// equal and from the same owner (docs/safety.md); an accepted operation
// makes its token the last. Fencing the read too makes each
// read-modify-write one fenced unit: with only the write fenced, two
// holders of a double grant could both read v and both write v+1 (the
// lower token first), and an update would be lost.

type opReq struct {
	C    string `json:"c"`
	S    int64  `json:"s"`
	W    bool   `json:"w"`
	Tok  uint64 `json:"tok"`
	Own  string `json:"own"`
	In   int64  `json:"in"`
	Call int64  `json:"call"`
}

type opResp struct {
	OK bool  `json:"ok"`
	V  int64 `json:"v"`
}

type opKey struct {
	c string
	s int64
}

type register struct {
	// acceptStale makes a broken register that accepts every token (for the
	// meta-test).
	acceptStale bool

	mu        sync.Mutex
	value     int64
	token     uint64
	owner     string
	ops       []check.Op
	byKey     map[opKey]int
	lastWrite int64 // unix ns of the last accepted write's apply

	ln  net.Listener
	srv *http.Server
}

func startRegister(acceptStale bool) (*register, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &register{acceptStale: acceptStale, byKey: map[opKey]int{}, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /op", r.serve)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *register) URL() string { return "http://" + r.ln.Addr().String() + "/op" }

func (r *register) Close() error { return r.srv.Close() }

func (r *register) serve(w http.ResponseWriter, req *http.Request) {
	var q opReq
	if err := json.NewDecoder(req.Body).Decode(&q); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(r.apply(q))
}

func (r *register) apply(q opReq) opResp {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := q.Tok > r.token || (q.Tok == r.token && q.Own == r.owner) || r.acceptStale
	op := check.Op{Client: q.C, Seq: q.S, Write: q.W, Token: q.Tok, Owner: q.Own, In: q.In, Call: q.Call, OK: ok, Order: len(r.ops)}
	var resp opResp
	if ok {
		r.token, r.owner = q.Tok, q.Own
		if q.W {
			r.value = q.In
			r.lastWrite = time.Now().UnixNano()
		} else {
			op.Out = r.value
		}
		resp = opResp{OK: true, V: r.value}
	}
	r.byKey[opKey{q.C, q.S}] = len(r.ops)
	r.ops = append(r.ops, op)
	return resp
}

// returned records when the client saw the answer of its operation.
func (r *register) returned(c string, s, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, ok := r.byKey[opKey{c, s}]; ok {
		r.ops[i].Return = at
	}
}

// writeAfter reports whether a write was accepted after t (unix ns).
func (r *register) writeAfter(t int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastWrite > t
}

func (r *register) history() []check.Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]check.Op(nil), r.ops...)
}
