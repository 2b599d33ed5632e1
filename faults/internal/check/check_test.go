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
