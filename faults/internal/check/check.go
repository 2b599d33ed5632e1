// Package check judges the history of a fault run (package faults): the
// operations a fenced register served, the holds the clients believed they
// had, and the faults injected. It checks that
//
//   - the register is linearizable, against a porcupine model of a fenced
//     register (an operation is accepted only with a token greater than the
//     register's last, or equal and from the same owner; reads are fenced
//     too, so a read-modify-write is one fenced unit);
//   - the tokens the register accepted never go backwards, and repeat only
//     for the same owner;
//   - no acknowledged update is lost: every accepted write adds exactly one
//     to the value before it;
//   - no two holds the clients believed valid overlap in real time (for
//     stores that may double-grant by design, such as Redis without
//     Redlock, overlaps are counted as double grants instead);
//   - no client believed it held past its lease's validity deadline: a
//     holder believes it holds until its lease's Done closes (or it calls
//     Release), and Done must close by Deadline() (late-loss; whatever
//     the store's design, unless the client's own process was stopped);
//   - after the last fault healed, an update was accepted within a bound.
//
// Where the run also drove a counting semaphore and a read-write lock
// (prims.go), it checks their holds too: never more permits held than the
// limit, never a writer with a reader or another writer, and the real-time
// order of their fencing tokens.
package check

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// An Op is one operation the register served (or that a client sent and
// never saw answered, then Return is 0).
type Op struct {
	Client string // client id ("c2.1": slot 2, second process; "u3.1": a user-made client's)
	Seq    int64  // per client
	Write  bool   // a write of In; otherwise a read
	Token  uint64 // fencing token presented
	Owner  string // lease owner presented
	In     int64  // the value written
	Call   int64  // unix ns: the client took it just before sending
	Return int64  // unix ns: the client got the answer; 0 if it never did
	OK     bool   // the register accepted it
	Out    int64  // a read's value (accepted reads only)
	Order  int    // position in the register's apply order
}

// Kinds of holds.
const (
	Lock  = ""      // the mutex
	Sem   = "sem"   // permits of the semaphore
	Read  = "read"  // the read side of the read-write lock
	Write = "write" // its write side
)

// A Hold is one interval in which a client believed it held the lock (or
// permits, or a side of the read-write lock): from Acquire's return to its
// Release call, the loss it observed, the lease's validity deadline or its
// process's death, whichever came first.
type Hold struct {
	Client     string
	Kind       string // Lock, Sem, Read or Write
	Permits    int    // Sem: how many permits the grant holds
	Token      uint64
	Owner      string
	Call       int64  // unix ns: the acquisition was called (0: unknown)
	Start, End int64  // unix ns
	Cut        string // why it ended: "release", "lost", "killed", "deadline", "end"
	// Deadline is the lease's validity deadline (Deadline()) when the hold
	// ended, as its client last saw it (unix ns; 0: unknown). End is never
	// past it.
	Deadline int64
	// Believed is when the client stopped believing it held: its Release
	// call or the moment it saw Done close, whichever came first, not cut
	// at Deadline (unix ns; 0: unknown, as for a killed client's hold).
	// The late-loss rule compares it with Deadline.
	Believed int64
}

// A Fault is one fault injected, with the times it began and healed.
type Fault struct {
	Kind, Target string
	Start, End   int64 // unix ns
}

// History is everything recorded in one run.
type History struct {
	Ops    []Op
	Holds  []Hold
	Faults []Fault
	// LastHeal is when the last fault healed (unix ns; 0: no faults).
	LastHeal int64
	// End is when the run stopped (unix ns).
	End int64
	// SemLimit is the semaphore's limit every client used (0: the run
	// drove no semaphore).
	SemLimit int
	// RW: the run drove the read-write lock.
	RW bool
}

// Options tune the judgement.
type Options struct {
	// DoubleGrantsByDesign: overlapping holds are counted as double grants,
	// not violations (Redis single node and Cluster).
	DoubleGrantsByDesign bool
	// RecoveryBound: an update must be accepted within it after the last
	// heal (0: not checked).
	RecoveryBound time.Duration
	// LinTimeout bounds the linearizability check (0: 2 minutes).
	LinTimeout time.Duration
	// TokensMayRepeat: fencing tokens of the semaphore and the read-write
	// lock may repeat or go back (a Redis Cluster failover to a replica
	// that missed the counter's last increment, redis.md); such anomalies
	// are counted in ByDesign, not violations. The register's checks are
	// unaffected (its owner check rejects a repeated token).
	TokensMayRepeat bool
	// LostOnRestart: a server restart frees every lock at once and their
	// holders learn of it only at their next renewal (SQL: row locks live
	// in the server's sessions, docs/sql.md). Overlaps (and permits over
	// the limit) that a restart explains (a fault of kind "restart" began
	// before the later grant and healed after the earlier hold began) are
	// counted as double grants or in ByDesign, not violations; the
	// register's checks still apply, so fencing must catch them. Any other
	// overlap is a violation.
	LostOnRestart bool
	// LateAllowance is how long after its Deadline() a client may still
	// believe it holds before the late-loss rule reports it: the lease's
	// timer and the client's observer run on busy cores (0: 100 ms).
	LateAllowance time.Duration
}

// excuse says whether the store's design explains holds overlapping at
// instant at, held being the holds granted before it (the ones a fault
// could have freed in the store).
type excuse struct {
	all      bool    // DoubleGrantsByDesign
	restarts []Fault // LostOnRestart: the run's restarts
}

func newExcuse(h History, o Options) excuse {
	e := excuse{all: o.DoubleGrantsByDesign}
	if o.LostOnRestart {
		for _, f := range h.Faults {
			if f.Kind == "restart" {
				e.restarts = append(e.restarts, f)
			}
		}
	}
	return e
}

func (e excuse) explains(at int64, held ...Hold) bool {
	if e.all {
		return true
	}
	for _, f := range e.restarts {
		if f.Start > at {
			continue
		}
		for _, h := range held {
			if h.Start <= f.End {
				return true
			}
		}
	}
	return false
}

// A Violation is one broken property, with the part of the history that
// shows it.
type Violation struct {
	Kind   string // "linearizability", "token-order", "lost-update", "overlap", "late-loss", "progress", "sem-limit", "sem-token", "rw-exclusion", "rw-write-token", "rw-read-token"
	Msg    string
	Window []string
}

// Result is the judgement of one history.
type Result struct {
	Ops, Accepted, Rejected, Pending int
	Writes                           int // accepted writes
	Holds                            int
	// Linearizable is porcupine's answer (Unknown: it timed out).
	Linearizable porcupine.CheckResult
	// Overlaps are pairs of holds that overlapped in real time.
	Overlaps [][2]Hold
	// DoubleGrants is len(Overlaps) when they are allowed by design.
	DoubleGrants int
	// StaleRejected counts ops of overlapping holds the register rejected
	// (what fencing caught of the double grants).
	StaleRejected int
	Recovery      time.Duration
	Recovered     bool
	// The semaphore's and the read-write lock's figures (prims.go).
	SemLimit, SemHolds, SemMaxHeld  int
	RWReads, RWWrites, RWMaxReaders int
	// PrimsRecovery: after the last heal, how long until the first grant
	// of each primitive ("semaphore grant", "read grant", "write grant").
	PrimsRecovery map[string]time.Duration
	// ByDesign counts, per kind, the semaphore's and read-write lock's
	// anomalies the store allows by design (DoubleGrantsByDesign,
	// TokensMayRepeat) instead of reporting them as violations.
	ByDesign map[string]int
	// Late counts the holds (of every kind) whose client believed it held
	// past the lease's Deadline() by more than LateAllowance: LateStopped
	// of them while its process was stopped (a stop fault, excused), the
	// others late-loss violations. WorstLate is the longest such belief
	// past the deadline, stopped clients left out.
	Late, LateStopped int
	WorstLate         time.Duration
	Violations        []Violation
}

// Check judges h.
func Check(h History, o Options) Result {
	if o.LinTimeout == 0 {
		o.LinTimeout = 2 * time.Minute
	}
	byKind := map[string][]Hold{}
	for _, x := range h.Holds {
		byKind[x.Kind] = append(byKind[x.Kind], x)
	}
	r := Result{Ops: len(h.Ops), Holds: len(byKind[Lock])}
	ops := append([]Op(nil), h.Ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Order < ops[j].Order })
	for _, op := range ops {
		switch {
		case op.OK:
			r.Accepted++
			if op.Write {
				r.Writes++
			}
		default:
			r.Rejected++
		}
		if op.Return == 0 {
			r.Pending++
		}
	}
	r.checkTokens(ops)
	r.checkLostUpdates(ops)
	r.checkLinearizable(ops, o.LinTimeout)
	ex := newExcuse(h, o)
	r.checkOverlaps(byKind[Lock], ops, ex)
	r.checkLate(h, byKind, ops, o.LateAllowance)
	r.checkProgress(h, ops, o.RecoveryBound)
	r.checkSemaphore(byKind[Sem], h.SemLimit, ex, o.TokensMayRepeat)
	if h.RW {
		r.checkRW(byKind[Read], byKind[Write], ex, o.TokensMayRepeat)
	}
	r.checkPrimsProgress(h, byKind[Sem], byKind[Read], byKind[Write], o.RecoveryBound)
	return r
}

func (r *Result) violate(kind, msg string, window []string) {
	r.Violations = append(r.Violations, Violation{Kind: kind, Msg: msg, Window: window})
}

// checkTokens: in apply order, accepted tokens never decrease, and repeat
// only for the same owner.
func (r *Result) checkTokens(ops []Op) {
	var last *Op
	for i := range ops {
		op := &ops[i]
		if !op.OK {
			continue
		}
		if last != nil && (op.Token < last.Token || (op.Token == last.Token && op.Owner != last.Owner)) {
			r.violate("token-order", fmt.Sprintf("the register accepted token %d from %s after token %d from %s",
				op.Token, short(op.Owner), last.Token, short(last.Owner)), opWindow(ops, last.Order, op.Order))
		}
		last = op
	}
}

// checkLostUpdates: every accepted write is the value before it plus one
// (each client writes read+1 under the lock), so no acknowledged update is
// overwritten.
func (r *Result) checkLostUpdates(ops []Op) {
	var value int64
	lastWrite := -1
	for i := range ops {
		op := &ops[i]
		if !op.OK || !op.Write {
			continue
		}
		if op.In != value+1 {
			from := op.Order
			if lastWrite >= 0 {
				from = lastWrite
			}
			r.violate("lost-update", fmt.Sprintf("client %s wrote %d over %d with token %d: %d update(s) lost",
				op.Client, op.In, value, op.Token, value+1-op.In), opWindow(ops, from, op.Order))
		}
		value, lastWrite = op.In, op.Order
	}
}

// The porcupine model of a fenced register.
type regState struct {
	Value int64
	Token uint64
	Owner string
}
type regIn struct {
	Write bool
	Token uint64
	Owner string
	Value int64
}
type regOut struct {
	Known bool // false: the client never saw an answer and the register has no record
	OK    bool
	Value int64
}

func accepts(s regState, in regIn) bool {
	return in.Token > s.Token || (in.Token == s.Token && in.Owner == s.Owner)
}

// Model is the sequential specification of the fenced register.
var Model = porcupine.Model{
	Init: func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(regState), input.(regIn), output.(regOut)
		ok := accepts(s, in)
		if out.Known && out.OK != ok {
			return false, s
		}
		if !ok {
			return true, s
		}
		if in.Write {
			return true, regState{Value: in.Value, Token: in.Token, Owner: in.Owner}
		}
		if out.Known && out.Value != s.Value {
			return false, s
		}
		return true, regState{Value: s.Value, Token: in.Token, Owner: in.Owner}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regIn), output.(regOut)
		verb := "read"
		if in.Write {
			verb = fmt.Sprintf("write(%d)", in.Value)
		}
		res := "?"
		if out.Known {
			res = "rejected"
			if out.OK {
				res = "ok"
				if !in.Write {
					res = fmt.Sprintf("%d", out.Value)
				}
			}
		}
		return fmt.Sprintf("%s t=%d o=%s -> %s", verb, in.Token, short(in.Owner), res)
	},
	DescribeState: func(state any) string {
		s := state.(regState)
		return fmt.Sprintf("v=%d t=%d o=%s", s.Value, s.Token, short(s.Owner))
	},
}

func porcupineOps(ops []Op) []porcupine.Operation {
	clients := map[string]int{}
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		id, ok := clients[op.Client]
		if !ok {
			id = len(clients)
			clients[op.Client] = id
		}
		ret := op.Return
		if ret == 0 || ret < op.Call {
			ret = math.MaxInt64 // never answered: concurrent with everything after its call
		}
		out = append(out, porcupine.Operation{
			ClientId: id,
			Input:    regIn{Write: op.Write, Token: op.Token, Owner: op.Owner, Value: op.In},
			Output:   regOut{Known: true, OK: op.OK, Value: op.Out},
			Call:     op.Call,
			Return:   ret,
		})
	}
	return out
}

func (r *Result) checkLinearizable(ops []Op, timeout time.Duration) {
	all := porcupineOps(ops)
	res, _ := porcupine.CheckOperationsVerbose(Model, all, timeout)
	r.Linearizable = res
	if res != porcupine.Illegal {
		return
	}
	// The shortest prefix (by invocation) that is not linearizable: its last
	// operation is the first one no linearization can explain.
	byCall := append([]Op(nil), ops...)
	sort.SliceStable(byCall, func(i, j int) bool { return byCall[i].Call < byCall[j].Call })
	pops := porcupineOps(byCall)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	lo, hi := 1, len(pops) // pops[:hi] fails
	for lo < hi && ctx.Err() == nil {
		mid := (lo + hi) / 2
		if porcupine.CheckOperationsTimeout(Model, pops[:mid], timeout/8) == porcupine.Illegal {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	bad := byCall[hi-1]
	from := bad.Call - int64(time.Second)
	var win []string
	for _, op := range byCall[:hi] {
		ret := op.Return
		if ret == 0 {
			ret = math.MaxInt64
		}
		if ret >= from {
			win = append(win, describeOp(op))
		}
	}
	if len(win) > 40 {
		win = append([]string{fmt.Sprintf("... %d earlier operations of the window left out", len(win)-40)}, win[len(win)-40:]...)
	}
	r.violate("linearizability", fmt.Sprintf("the register's history is not linearizable: the shortest failing prefix has %d of %d operations and ends with %s",
		hi, len(ops), describeOp(bad)), win)
}

// checkOverlaps compares every pair of the lock's holds of different
// clients.
func (r *Result) checkOverlaps(lockHolds []Hold, ops []Op, ex excuse) {
	holds := append([]Hold(nil), lockHolds...)
	sort.Slice(holds, func(i, j int) bool { return holds[i].Start < holds[j].Start })
	for i := range holds {
		for j := i + 1; j < len(holds) && holds[j].Start < holds[i].End; j++ {
			a, b := holds[i], holds[j]
			if a.Client == b.Client || a.End <= a.Start || b.End <= b.Start {
				continue
			}
			r.Overlaps = append(r.Overlaps, [2]Hold{a, b})
			var win []string
			from, to := b.Start, min(a.End, b.End)
			win = append(win, describeHold(a), describeHold(b))
			for _, op := range ops {
				if op.Call <= to && (op.Return == 0 || op.Return >= from) &&
					((op.Client == a.Client && op.Token == a.Token) || (op.Client == b.Client && op.Token == b.Token)) {
					if !op.OK {
						r.StaleRejected++
					}
					win = append(win, describeOp(op))
				}
			}
			msg := fmt.Sprintf("holds of %s (token %d) and %s (token %d) overlapped for %v",
				a.Client, a.Token, b.Client, b.Token, time.Duration(to-from).Round(time.Millisecond))
			if ex.explains(b.Start, a) {
				r.DoubleGrants++
				continue
			}
			r.violate("overlap", msg, win)
		}
	}
}

// checkProgress: an update accepted after the last heal, within bound.
func (r *Result) checkProgress(h History, ops []Op, bound time.Duration) {
	if h.LastHeal == 0 {
		r.Recovered = true
		return
	}
	for _, op := range ops {
		if op.OK && op.Write && op.Call >= h.LastHeal {
			r.Recovered = true
			r.Recovery = time.Duration(op.Return - h.LastHeal)
			if op.Return == 0 {
				r.Recovery = time.Duration(op.Call - h.LastHeal)
			}
			break
		}
	}
	if bound > 0 && (!r.Recovered || r.Recovery > bound) {
		msg := fmt.Sprintf("no update accepted within %v of the last heal", bound)
		if r.Recovered {
			msg = fmt.Sprintf("the first update after the last heal took %v (bound %v)", r.Recovery, bound)
		}
		var win []string
		for _, f := range h.Faults {
			win = append(win, describeFault(f))
		}
		r.violate("progress", msg, win)
	}
}

// OK reports whether no property was violated.
func (r Result) OK() bool { return len(r.Violations) == 0 }

// Summary is one line of figures.
func (r Result) Summary() string {
	rec := "n/a"
	if r.Recovered {
		rec = r.Recovery.Round(time.Millisecond).String()
	} else {
		rec = "none"
	}
	return fmt.Sprintf("ops %d (accepted %d, rejected %d, unanswered %d), writes %d, holds %d, linearizable %s, violations %d, double grants %d (ops of them fencing rejected %d), held past deadline %d (worst %v, stopped %d), recovery %s",
		r.Ops, r.Accepted, r.Rejected, r.Pending, r.Writes, r.Holds, r.Linearizable, len(r.Violations), r.DoubleGrants, r.StaleRejected,
		r.Late-r.LateStopped, r.WorstLate.Round(time.Millisecond), r.LateStopped, rec) + r.primsSummary()
}

// Report writes the violations with their windows: the first three of
// each kind, and how many more there were.
func (r Result) Report(w io.Writer) {
	seen := map[string]int{}
	var kinds []string
	for i, v := range r.Violations {
		if seen[v.Kind]++; seen[v.Kind] == 1 {
			kinds = append(kinds, v.Kind)
		}
		if seen[v.Kind] > 3 {
			continue
		}
		fmt.Fprintf(w, "VIOLATION %d (%s): %s\n", i+1, v.Kind, v.Msg)
		for _, l := range v.Window {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	for _, k := range kinds {
		if seen[k] > 3 {
			fmt.Fprintf(w, "... and %d more %s violations\n", seen[k]-3, k)
		}
	}
}

func opWindow(ops []Op, from, to int) []string {
	var out []string
	for _, op := range ops {
		if op.Order >= from && op.Order <= to {
			out = append(out, describeOp(op))
		}
	}
	if len(out) > 40 {
		out = append(out[:20:20], append([]string{fmt.Sprintf("... %d operations left out", len(out)-40)}, out[len(out)-20:]...)...)
	}
	return out
}

func ts(ns int64) string {
	if ns == 0 || ns == math.MaxInt64 {
		return "never"
	}
	return time.Unix(0, ns).Format("15:04:05.000000")
}

func describeOp(op Op) string {
	verb := "read    "
	if op.Write {
		verb = fmt.Sprintf("write %-2d", op.In)
	}
	res := "rejected"
	if op.OK {
		res = "ok"
		if !op.Write {
			res = fmt.Sprintf("-> %d", op.Out)
		}
	}
	return fmt.Sprintf("#%-5d %s..%s %-6s %s token %d owner %s: %s", op.Order, ts(op.Call), ts(op.Return), op.Client, verb, op.Token, short(op.Owner), res)
}

func describeHold(h Hold) string {
	kind := "hold "
	switch h.Kind {
	case Sem:
		kind = fmt.Sprintf("sem %d", h.Permits)
	case Read, Write:
		kind = h.Kind
	}
	return fmt.Sprintf("%-5s %s..%s %-6s token %d owner %s (asked %s; ended: %s)", kind, ts(h.Start), ts(h.End), h.Client, h.Token, short(h.Owner), ts(h.Call), h.Cut)
}

func describeFault(f Fault) string {
	return fmt.Sprintf("fault %s..%s %s %s", ts(f.Start), ts(f.End), f.Kind, f.Target)
}

func short(owner string) string {
	if len(owner) > 8 {
		return owner[:8]
	}
	return owner
}

// Describe renders a history's faults for a report.
func Describe(fs []Fault) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(describeFault(f))
		b.WriteByte('\n')
	}
	return b.String()
}
