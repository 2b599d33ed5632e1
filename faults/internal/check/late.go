package check

import (
	"fmt"
	"sort"
	"time"
)

// The late-loss rule. The library promises that a lease is reported lost
// (Done, Err, Context) no later than its validity deadline, whatever the
// store's client does meanwhile: past Deadline() the store may expire the
// lock and grant it to another client, so a holder that still believes
// it holds then acts beside the next one. A client believes it holds from
// Acquire's return until it calls Release or sees Done close (Hold's
// Believed); the rule reports every hold whose belief outlived its
// Deadline() by more than the allowance, with the rivals granted
// meanwhile (a client acting as holder after another was granted) and the
// operations the late holder sent after its deadline. The store's design
// excuses nothing here (it is the client side's promise); only a stop
// fault on the client's own process does, since a stopped process can
// observe nothing.

// defaultLateAllowance is Options.LateAllowance's default.
const defaultLateAllowance = 100 * time.Millisecond

// family is the set of hold kinds a hold's rivals are drawn from: the
// lock's holds for the lock, the semaphore's for a permit, either side
// of the read-write lock for a read or a write.
func family(kind string) []string {
	switch kind {
	case Sem:
		return []string{Sem}
	case Read, Write:
		return []string{Read, Write}
	default:
		return []string{Lock}
	}
}

func (r *Result) checkLate(h History, byKind map[string][]Hold, ops []Op, allowance time.Duration) {
	if allowance <= 0 {
		allowance = defaultLateAllowance
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		for _, x := range byKind[k] {
			if x.Believed == 0 || x.Deadline == 0 || x.Believed-x.Deadline <= int64(allowance) {
				continue
			}
			r.Late++
			late := time.Duration(x.Believed - x.Deadline)
			if Stopped(h.Faults, x.Client, x.Deadline, x.Believed) {
				r.LateStopped++
				continue
			}
			r.WorstLate = max(r.WorstLate, late)
			r.lateViolation(h, byKind, ops, x, late, allowance)
		}
	}
}

// Stopped reports whether a stop fault of client's process overlapped
// [from, to] (unix ns).
func Stopped(fs []Fault, client string, from, to int64) bool {
	for _, f := range fs {
		if f.Kind == "stop" && f.Target == "client "+client && f.Start <= to && f.End >= from {
			return true
		}
	}
	return false
}

func (r *Result) lateViolation(h History, byKind map[string][]Hold, ops []Op, x Hold, late, allowance time.Duration) {
	what := "lock hold"
	switch x.Kind {
	case Sem:
		what = fmt.Sprintf("semaphore hold of %d permit(s)", x.Permits)
	case Read, Write:
		what = x.Kind + " hold"
	}
	win := []string{describeHold(x) + fmt.Sprintf(" [deadline %s, believed until %s]", ts(x.Deadline), ts(x.Believed))}
	// Rivals: holds of other clients granted while x's client still
	// believed it held, after its deadline (the first few in the window).
	var rivals []Hold
	for _, k := range family(x.Kind) {
		for _, y := range byKind[k] {
			if y.Client == x.Client || y.Start <= x.Deadline || y.Start >= x.Believed {
				continue
			}
			if x.Kind == Read && y.Kind == Read {
				continue // readers share
			}
			rivals = append(rivals, y)
		}
	}
	sort.Slice(rivals, func(i, j int) bool { return rivals[i].Start < rivals[j].Start })
	const shown = 5
	for i, y := range rivals {
		if i == shown {
			win = append(win, fmt.Sprintf("... %d more grants to other clients before it learned", len(rivals)-shown))
			break
		}
		win = append(win, describeHold(y))
	}
	// What it sent after its deadline with the lease's token.
	for _, op := range ops {
		if op.Client == x.Client && op.Token == x.Token && op.Owner == x.Owner && op.Call > x.Deadline && op.Call < x.Believed {
			win = append(win, describeOp(op))
		}
	}
	for _, f := range h.Faults {
		if f.Start <= x.Believed && f.End >= x.Start {
			win = append(win, describeFault(f))
		}
	}
	msg := fmt.Sprintf("%s believed its %s (token %d) held %v past the lease's Deadline() (allowed %v): it learned of the loss at %s, its validity ran out at %s",
		x.Client, what, x.Token, late.Round(time.Millisecond), allowance, ts(x.Believed), ts(x.Deadline))
	if len(rivals) > 0 {
		y := rivals[0]
		msg += fmt.Sprintf("; meanwhile %s was granted the %s (token %d) %v before it learned",
			y.Client, holdWord(y), y.Token, time.Duration(x.Believed-y.Start).Round(time.Millisecond))
		if len(rivals) > 1 {
			msg += fmt.Sprintf(", and %d more grants followed", len(rivals)-1)
		}
	}
	r.violate("late-loss", msg, win)
}

func holdWord(h Hold) string {
	switch h.Kind {
	case Sem:
		return fmt.Sprintf("%d permit(s)", h.Permits)
	case Read, Write:
		return h.Kind
	default:
		return "lock"
	}
}
