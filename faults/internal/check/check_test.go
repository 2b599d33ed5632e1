package check

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// reg is a register for building histories: accept decides what it takes.
type reg struct {
	s      regState
	ops    []Op
	now    int64
	accept func(regState, regIn) bool
}

func (g *reg) do(client, owner string, token uint64, write bool, in int64) Op {
	g.now += 10
	op := Op{Client: client, Seq: int64(len(g.ops)), Write: write, Token: token, Owner: owner, In: in, Call: g.now, Order: len(g.ops)}
	ri := regIn{Write: write, Token: token, Owner: owner, Value: in}
	if g.accept(g.s, ri) {
		op.OK = true
		if write {
			g.s.Value = in
		} else {
			op.Out = g.s.Value
		}
		g.s.Token, g.s.Owner = token, owner
	}
	g.now += 10
	op.Return = g.now
	g.ops = append(g.ops, op)
	return op
}

func rmw(g *reg, client, owner string, token uint64) {
	if r := g.do(client, owner, token, false, 0); r.OK {
		g.do(client, owner, token, true, r.Out+1)
	}
}

func TestGoodHistory(t *testing.T) {
	g := &reg{accept: accepts}
	for i := range 50 {
		rmw(g, "c"+string(rune('0'+i%3)), "owner"+string(rune('a'+i)), uint64(i+1))
	}
	r := Check(History{Ops: g.ops}, Options{})
	if !r.OK() || r.Linearizable != porcupine.Ok || r.Writes != 50 {
		var b strings.Builder
		r.Report(&b)
		t.Fatalf("%s\n%s", r.Summary(), b.String())
	}
}

// A stale holder's interleaved read-modify-write is rejected by a correct
// register; a register that accepts stale tokens loses an update, and every
// register check says so.
func TestStaleWrites(t *testing.T) {
	run := func(accept func(regState, regIn) bool) Result {
		g := &reg{accept: accept}
		rmw(g, "c0", "A", 1)
		a := g.do("c0", "A", 2, false, 0) // A (token 2) reads, then pauses
		rmw(g, "c1", "B", 3)              // B (token 3) does its update
		g.do("c0", "A", 2, true, a.Out+1) // A's stale write
		rmw(g, "c1", "B", 3)
		return Check(History{Ops: g.ops}, Options{})
	}
	if r := run(accepts); !r.OK() || r.Rejected != 1 {
		t.Fatalf("correct register: %s %v", r.Summary(), r.Violations)
	}
	r := run(func(regState, regIn) bool { return true })
	kinds := map[string]bool{}
	for _, v := range r.Violations {
		kinds[v.Kind] = true
	}
	for _, k := range []string{"linearizability", "token-order", "lost-update"} {
		if !kinds[k] {
			t.Errorf("a register accepting stale tokens: no %s violation (%s)", k, r.Summary())
		}
	}
	var b strings.Builder
	r.Report(&b)
	t.Logf("report:\n%s", b.String())
}

func TestOverlaps(t *testing.T) {
	s := time.Now().UnixNano()
	ms := int64(time.Millisecond)
	h := History{Holds: []Hold{
		{Client: "c0", Token: 1, Owner: "A", Start: s, End: s + 100*ms},
		{Client: "c1", Token: 2, Owner: "B", Start: s + 100*ms, End: s + 200*ms}, // touching: fine
		{Client: "c2", Token: 3, Owner: "C", Start: s + 150*ms, End: s + 300*ms}, // overlaps B
	}}
	r := Check(h, Options{})
	if len(r.Overlaps) != 1 || len(r.Violations) != 1 || r.Violations[0].Kind != "overlap" {
		t.Fatalf("%s %+v", r.Summary(), r.Violations)
	}
	r = Check(h, Options{DoubleGrantsByDesign: true})
	if !r.OK() || r.DoubleGrants != 1 {
		t.Fatalf("by design: %s %+v", r.Summary(), r.Violations)
	}
}

func TestProgress(t *testing.T) {
	g := &reg{accept: accepts, now: 1000}
	rmw(g, "c0", "A", 1)
	h := History{Ops: g.ops, LastHeal: 1015}
	if r := Check(h, Options{RecoveryBound: time.Second}); !r.OK() || r.Recovery != 25 {
		t.Fatalf("%s %v", r.Summary(), r.Violations)
	}
	h.LastHeal = 5000
	if r := Check(h, Options{RecoveryBound: time.Second}); r.OK() {
		t.Fatalf("no update after the heal, yet %s", r.Summary())
	}
}

// kinds returns the violation kinds of r, and how often each occurs.
func kinds(r Result) map[string]int {
	k := map[string]int{}
	for _, v := range r.Violations {
		k[v.Kind]++
	}
	return k
}

func report(r Result) string {
	var b strings.Builder
	r.Report(&b)
	return r.Summary() + "\n" + b.String()
}

// hold makes a hold from ms offsets: asked at call, held from start to end.
func hold(client, kind string, permits int, token uint64, call, start, end int64) Hold {
	ms := int64(time.Millisecond)
	base := int64(1_700_000_000_000_000_000)
	return Hold{Client: client, Kind: kind, Permits: permits, Token: token, Owner: client + "-" + kind,
		Call: base + call*ms, Start: base + start*ms, End: base + end*ms, Cut: "release"}
}

func TestSemaphoreGood(t *testing.T) {
	h := History{SemLimit: 2, Holds: []Hold{
		hold("c0", Sem, 1, 1, 0, 1, 50),
		hold("c1", Sem, 1, 2, 0, 2, 60),
		hold("c2", Sem, 2, 3, 10, 60, 100), // waits for both; touches c1's end
		hold("c3", Sem, 1, 4, 20, 100, 120),
		hold("c0", Sem, 1, 5, 90, 101, 130), // asked while c2 held: token above the grants seen
		// a lock hold overlapping: the lock is another thing
		hold("c1", Lock, 0, 9, 0, 1, 200),
	}}
	r := Check(h, Options{})
	if !r.OK() || r.SemMaxHeld != 2 || r.SemHolds != 5 || r.Holds != 1 {
		t.Fatalf("%s", report(r))
	}
}

// Three permits held at once under a limit of 2: a sem-limit violation
// (one per episode), counted instead where the store allows it by design.
func TestSemaphoreOverLimit(t *testing.T) {
	h := History{SemLimit: 2, Holds: []Hold{
		hold("c0", Sem, 1, 1, 0, 1, 50),
		hold("c1", Sem, 1, 2, 0, 2, 60),
		hold("c2", Sem, 1, 3, 0, 40, 100), // 3 held from 40 to 50
		hold("c3", Sem, 2, 4, 0, 200, 300),
		hold("c0", Sem, 1, 5, 0, 250, 260), // 3 again, a second episode
	}}
	r := Check(h, Options{})
	if k := kinds(r); k["sem-limit"] != 2 || len(r.Violations) != 2 || r.SemMaxHeld != 3 {
		t.Fatalf("want 2 sem-limit violations:\n%s", report(r))
	}
	t.Logf("report:\n%s", report(r))
	r = Check(h, Options{DoubleGrantsByDesign: true})
	if !r.OK() || r.ByDesign["sem-limit"] != 2 {
		t.Fatalf("by design: %s", report(r))
	}
	// A permit lost (the hold cut at its loss) before the next grant is
	// not counted after its loss.
	h.Holds[2] = hold("c2", Sem, 1, 3, 0, 50, 100)
	h.Holds[4] = hold("c0", Sem, 1, 5, 0, 300, 310)
	if r := Check(h, Options{}); !r.OK() {
		t.Fatalf("touching holds: %s", report(r))
	}
}

func TestSemaphoreTokens(t *testing.T) {
	for _, c := range []struct {
		name  string
		holds []Hold
	}{
		{"repeated", []Hold{
			hold("c0", Sem, 1, 7, 0, 1, 50),
			hold("c1", Sem, 1, 7, 0, 2, 60),
		}},
		{"backwards", []Hold{
			hold("c0", Sem, 1, 8, 0, 1, 50),
			hold("c1", Sem, 1, 5, 10, 12, 60), // asked after c0's grant was seen
		}},
	} {
		r := Check(History{SemLimit: 2, Holds: c.holds}, Options{})
		if k := kinds(r); k["sem-token"] != 1 || len(r.Violations) != 1 {
			t.Errorf("%s: want one sem-token violation:\n%s", c.name, report(r))
		}
		if r := Check(History{SemLimit: 2, Holds: c.holds}, Options{TokensMayRepeat: true}); !r.OK() || r.ByDesign["sem-token"] != 1 {
			t.Errorf("%s, tokens may repeat: %s", c.name, report(r))
		}
	}
	// Concurrent acquisitions may be granted in either order.
	ok := []Hold{hold("c0", Sem, 1, 8, 0, 10, 50), hold("c1", Sem, 1, 5, 5, 12, 60)}
	if r := Check(History{SemLimit: 2, Holds: ok}, Options{}); !r.OK() {
		t.Errorf("concurrent acquisitions: %s", report(r))
	}
}

func TestRWGood(t *testing.T) {
	h := History{RW: true, Holds: []Hold{
		hold("c0", Read, 0, 0, 0, 1, 50), // before any write: token 0
		hold("c1", Read, 0, 0, 0, 2, 60), // readers share
		hold("c2", Write, 0, 3, 5, 60, 100),
		hold("c0", Read, 0, 3, 70, 100, 150), // asked during the write: its token
		hold("c1", Read, 0, 3, 80, 101, 140),
		hold("c3", Write, 0, 9, 90, 150, 160),
		hold("c2", Read, 0, 12, 155, 170, 180), // a write granted but never reported (12) is the last
		hold("c1", Write, 0, 15, 175, 180, 190),
	}}
	r := Check(h, Options{})
	if !r.OK() || r.RWReads != 5 || r.RWWrites != 3 || r.RWMaxReaders != 2 {
		t.Fatalf("%s", report(r))
	}
}

func TestRWExclusion(t *testing.T) {
	h := History{RW: true, Holds: []Hold{
		hold("c0", Read, 0, 0, 0, 1, 50),
		hold("c1", Write, 0, 3, 0, 40, 60), // over c0's read
		hold("c2", Write, 0, 4, 0, 55, 70), // over c1's write
		hold("c3", Read, 0, 4, 0, 70, 80),  // touching: fine
	}}
	r := Check(h, Options{})
	if k := kinds(r); k["rw-exclusion"] != 2 || len(r.Violations) != 2 {
		t.Fatalf("want 2 rw-exclusion violations:\n%s", report(r))
	}
	t.Logf("report:\n%s", report(r))
	if r := Check(h, Options{DoubleGrantsByDesign: true}); !r.OK() || r.ByDesign["rw-exclusion"] != 2 {
		t.Fatalf("by design: %s", report(r))
	}
}

func TestRWTokens(t *testing.T) {
	for _, c := range []struct {
		name  string
		kind  string
		holds []Hold
	}{
		{"write-repeated", "rw-write-token", []Hold{
			hold("c0", Write, 0, 5, 0, 1, 50),
			hold("c1", Write, 0, 5, 0, 50, 60),
		}},
		{"write-backwards", "rw-write-token", []Hold{
			hold("c0", Write, 0, 5, 0, 1, 50),
			hold("c1", Write, 0, 4, 10, 50, 60),
		}},
		{"read-before-a-seen-write", "rw-read-token", []Hold{
			hold("c0", Write, 0, 5, 0, 1, 50),
			hold("c1", Read, 0, 2, 10, 50, 60), // asked after the write was seen granted
		}},
		{"read-of-a-later-write", "rw-read-token", []Hold{
			hold("c0", Read, 0, 5, 0, 1, 50),
			hold("c1", Write, 0, 5, 10, 50, 60), // asked after the read was seen granted
		}},
	} {
		r := Check(History{RW: true, Holds: c.holds}, Options{})
		if k := kinds(r); k[c.kind] != 1 || len(r.Violations) != 1 {
			t.Errorf("%s: want one %s violation:\n%s", c.name, c.kind, report(r))
		}
		if r := Check(History{RW: true, Holds: c.holds}, Options{TokensMayRepeat: true}); !r.OK() || r.ByDesign[c.kind] != 1 {
			t.Errorf("%s, tokens may repeat: %s", c.name, report(r))
		}
	}
}

func TestPrimsProgress(t *testing.T) {
	h := History{SemLimit: 2, RW: true, Holds: []Hold{
		hold("c0", Sem, 1, 1, 0, 1, 50),
		hold("c0", Read, 0, 0, 0, 1, 50),
		hold("c1", Write, 0, 3, 0, 50, 60),
	}}
	lockUpdate := func() { // the lock's own progress, after the heal
		g := &reg{accept: accepts, now: h.LastHeal}
		rmw(g, "c9", "Z", 1)
		h.Ops = g.ops
	}
	h.LastHeal = h.Holds[0].Start - int64(time.Millisecond)
	lockUpdate()
	r := Check(h, Options{RecoveryBound: time.Second})
	if !r.OK() || r.PrimsRecovery["write grant"] != 50*time.Millisecond {
		t.Fatalf("%s %v", report(r), r.PrimsRecovery)
	}
	h.LastHeal = h.Holds[0].Start + int64(39*time.Millisecond) // only the write after it
	lockUpdate()
	r = Check(h, Options{RecoveryBound: time.Second})
	if k := kinds(r); k["progress"] != 2 {
		t.Fatalf("want progress violations for the semaphore and the reads:\n%s", report(r))
	}
}

// TestLostOnRestart: on a store whose locks a server restart frees (SQL),
// an overlap, permits over the limit or a writer with a reader is counted
// by design when a restart explains it (it began before the later grant
// and healed after the earlier hold began), and is a violation otherwise:
// with no restart, or a restart that healed before the earlier hold.
func TestLostOnRestart(t *testing.T) {
	base := int64(1_700_000_000_000_000_000)
	ms := int64(time.Millisecond)
	restart := func(from, to int64) Fault {
		return Fault{Kind: "restart", Target: "db-0", Start: base + from*ms, End: base + to*ms}
	}
	holds := []Hold{
		hold("c0", Lock, 0, 1, 0, 10, 100),
		hold("c1", Lock, 0, 2, 0, 60, 120), // over c0's
		hold("c0", Sem, 1, 3, 0, 10, 100),
		hold("c1", Sem, 1, 4, 0, 20, 100),
		hold("c2", Sem, 1, 5, 0, 60, 120), // 3 permits under a limit of 2
		hold("c0", Write, 0, 6, 0, 10, 100),
		hold("c1", Read, 0, 6, 0, 60, 120), // a reader over the writer
	}
	for _, c := range []struct {
		name   string
		faults []Fault
		opts   Options
		excuse bool
	}{
		{"restart explains", []Fault{restart(50, 500)}, Options{LostOnRestart: true}, true},
		{"grant during the restart", []Fault{restart(55, 65)}, Options{LostOnRestart: true}, true},
		{"no restart", nil, Options{LostOnRestart: true}, false},
		{"restart healed before", []Fault{restart(0, 5)}, Options{LostOnRestart: true}, false},
		{"restart after the grant", []Fault{restart(70, 90)}, Options{LostOnRestart: true}, false},
		{"a pause is not a restart", []Fault{{Kind: "pause", Start: base + 50*ms, End: base + 500*ms}}, Options{LostOnRestart: true}, false},
		{"store keeps locks over restarts", []Fault{restart(50, 500)}, Options{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(History{SemLimit: 2, RW: true, Holds: holds, Faults: c.faults}, c.opts)
			k := kinds(r)
			if c.excuse {
				if !r.OK() || r.DoubleGrants != 1 || r.ByDesign["sem-limit"] != 1 || r.ByDesign["rw-exclusion"] != 1 {
					t.Fatalf("want all three counted by design:\n%s", report(r))
				}
				return
			}
			if k["overlap"] != 1 || k["sem-limit"] != 1 || k["rw-exclusion"] != 1 {
				t.Fatalf("want an overlap, a sem-limit and an rw-exclusion violation:\n%s", report(r))
			}
		})
	}
}

// lateHold is hold with the lease's deadline and the moment its client
// stopped believing it held (ms offsets); End is cut at the deadline, as
// the clients record it.
func lateHold(client, kind string, token uint64, start, deadline, believed int64) Hold {
	h := hold(client, kind, 1, token, start, start, min(deadline, believed))
	ms := int64(time.Millisecond)
	h.Deadline, h.Believed = h.Start+(deadline-start)*ms, h.Start+(believed-start)*ms
	return h
}

// A holder whose Done closed long after its Deadline() (a store client
// that waited out its read timeout) while another client was granted the
// lock: the overlap check sees nothing (the holds are cut at the
// deadline, and the store may double-grant by design), the late-loss rule
// reports the holder acting after the rival's grant; within the
// allowance, while its process was stopped, or with nothing known of its
// belief, it is not reported.
func TestLateLoss(t *testing.T) {
	base := int64(1_700_000_000_000_000_000)
	ms := int64(time.Millisecond)
	g := &reg{accept: accepts, now: base}
	late := lateHold("u1.1", Lock, 5, 0, 2000, 3100) // Done 1.1 s after the deadline
	rival := hold("c0.1", Lock, 0, 6, 1000, 2050, 2200)
	g.now = late.Deadline + 500*ms // the late holder writes after its deadline
	rmw(g, "u1.1", late.Owner, 5)
	h := History{Holds: []Hold{late, rival}, Ops: g.ops}
	for _, design := range []bool{false, true} {
		r := Check(h, Options{DoubleGrantsByDesign: design, LateAllowance: 200 * time.Millisecond})
		if k := kinds(r); k["late-loss"] != 1 || len(r.Violations) != 1 || len(r.Overlaps) != 0 || r.Late != 1 || r.WorstLate != 1100*time.Millisecond {
			t.Fatalf("by design %v: want one late-loss violation and no overlap:\n%s", design, report(r))
		}
		v := r.Violations[0]
		if !strings.Contains(v.Msg, "c0.1 was granted the lock") || !strings.Contains(strings.Join(v.Window, "\n"), "u1.1   read") {
			t.Errorf("the violation names neither the rival's grant nor the late holder's operations:\n%s", report(r))
		}
	}
	t.Logf("report:\n%s", report(Check(h, Options{LateAllowance: 200 * time.Millisecond})))

	ok := []Hold{
		lateHold("u1.1", Lock, 5, 0, 2000, 2150), // within the allowance
		lateHold("c0.1", Sem, 6, 0, 2000, 1500),  // released before its deadline
		hold("c2.1", Lock, 0, 7, 2200, 2300, 2400),
	}
	killed := lateHold("c3.1", Write, 8, 0, 2000, 4000)
	killed.Believed = 0 // a killed client's belief is unknown
	ok = append(ok, killed)
	if r := Check(History{Holds: ok, SemLimit: 2, RW: true}, Options{LateAllowance: 200 * time.Millisecond}); !r.OK() || r.Late != 0 {
		t.Errorf("no late loss: %s", report(r))
	}

	stopped := History{Holds: []Hold{late, rival}, Faults: []Fault{{Kind: "stop", Target: "client u1.1", Start: base + 1900*ms, End: base + 3050*ms}}}
	if r := Check(stopped, Options{LateAllowance: 200 * time.Millisecond}); !r.OK() || r.Late != 1 || r.LateStopped != 1 {
		t.Errorf("a stopped client's late belief: %s", report(r))
	}
	other := History{Holds: []Hold{late, rival}, Faults: []Fault{{Kind: "stop", Target: "client c0.1", Start: base + 1900*ms, End: base + 3050*ms}}}
	if r := Check(other, Options{LateAllowance: 200 * time.Millisecond}); kinds(r)["late-loss"] != 1 {
		t.Errorf("another client's stop excused the late holder: %s", report(r))
	}
}
