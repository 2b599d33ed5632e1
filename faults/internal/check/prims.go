package check

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The semaphore and the read-write lock have no fenced register: their
// holders do not share one resource a token could order (several permit
// holders, or several readers, hold together). They are judged on the
// holds alone, with the validity the mutex's holds use (a hold ends at
// its release call, the loss its client observed, its validity deadline
// or its process's death, whichever came first), and on the real-time
// order of grants: a grant whose holder saw it (Start) before another
// acquisition was even called (Call) was made first in the store.
//
// The rules, from the package docs of distlock (semaphore.go, rwmutex.go)
// and docs/primitives.md:
//
//   - semaphore: the permits of the holds valid at any instant sum to at
//     most the limit (every client uses the same limit); every grant's
//     token is unique, and greater than the token of every grant seen
//     before the acquisition was called;
//   - read-write lock: a write hold overlaps no hold of another client,
//     read or write; write tokens are unique and increase in real time as
//     semaphore tokens do; a read's token is the token of the last write
//     granted before it (0 before the first), so it is at least the token
//     of every write seen granted before the read was called, and less
//     than the token of every write called after the read was seen
//     granted. (Equality with a recorded write is not required: a write
//     granted in the store whose client died, or gave the grant back
//     after a lost reply, before it reported the hold still counts as the
//     last write.)

// checkSemaphore judges the semaphore holds against limit.
func (r *Result) checkSemaphore(holds []Hold, limit int, ex excuse, tokensRepeat bool) {
	if limit <= 0 {
		return
	}
	r.SemLimit = limit
	type event struct {
		at    int64
		delta int // +1 start, -1 end
		h     int
	}
	var evs []event
	for i, h := range holds {
		r.SemHolds++
		if h.End <= h.Start {
			continue
		}
		evs = append(evs, event{h.Start, 1, i}, event{h.End, -1, i})
	}
	// Ends before starts at the same instant: touching holds do not overlap.
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].delta < evs[j].delta
	})
	active := map[int]bool{}
	held, over := 0, false
	var episode []int // the holds active when the count first went over
	worst, worstAt := 0, int64(0)
	flush := func(until int64) {
		if !over {
			return
		}
		over = false
		var win []string
		var held []Hold
		for _, i := range episode {
			win = append(win, describeHold(holds[i]))
			held = append(held, holds[i])
		}
		end := "the end of the history"
		if until != 0 {
			end = ts(until)
		}
		msg := fmt.Sprintf("%d permits held at once at %s (limit %d), over the limit until %s", worst, ts(worstAt), limit, end)
		r.judge("sem-limit", msg, win, ex.explains(worstAt, held...))
	}
	for _, e := range evs {
		h := holds[e.h]
		if e.delta > 0 {
			active[e.h] = true
			held += h.Permits
		} else {
			delete(active, e.h)
			held -= h.Permits
		}
		if held > r.SemMaxHeld {
			r.SemMaxHeld = held
		}
		switch {
		case held > limit && !over:
			over, worst, worstAt = true, held, e.at
			episode = episode[:0]
			for i := range active {
				episode = append(episode, i)
			}
			sort.Slice(episode, func(a, b int) bool { return holds[episode[a]].Start < holds[episode[b]].Start })
		case held > limit && held > worst:
			worst, worstAt = held, e.at
		case held <= limit:
			flush(e.at)
		}
	}
	flush(0)
	r.checkGrantTokens("sem-token", "semaphore grant", holds, tokensRepeat)
}

// checkGrantTokens: tokens of distinct grants are unique, and a grant seen
// (Start) before another was called (Call) has the smaller token.
func (r *Result) checkGrantTokens(kind, what string, holds []Hold, tokensRepeat bool) {
	byTok := map[uint64]int{}
	for i, h := range holds {
		if j, ok := byTok[h.Token]; ok {
			a := holds[j]
			r.judge(kind, fmt.Sprintf("two %ss have token %d: %s's and %s's", what, h.Token, a.Client, h.Client),
				[]string{describeHold(a), describeHold(h)}, tokensRepeat)
			continue
		}
		byTok[h.Token] = i
	}
	// Sweep the calls in time order, keeping the greatest token among
	// the grants seen before.
	seen := append([]Hold(nil), holds...)
	sort.Slice(seen, func(i, j int) bool { return seen[i].Start < seen[j].Start })
	calls := append([]Hold(nil), holds...)
	sort.Slice(calls, func(i, j int) bool { return calls[i].Call < calls[j].Call })
	var best *Hold
	k := 0
	for i := range calls {
		b := calls[i]
		if b.Call == 0 {
			continue
		}
		for ; k < len(seen) && seen[k].Start < b.Call; k++ {
			if best == nil || seen[k].Token > best.Token {
				best = &seen[k]
			}
		}
		if best != nil && b.Token < best.Token {
			r.judge(kind, fmt.Sprintf("%s of %s has token %d, below token %d of %s's, which it saw granted before it asked",
				what, b.Client, b.Token, best.Token, best.Client),
				[]string{describeHold(*best), describeHold(b)}, tokensRepeat)
		}
	}
}

// checkRW judges the read-write lock's holds.
func (r *Result) checkRW(reads, writes []Hold, ex excuse, tokensRepeat bool) {
	r.RWReads, r.RWWrites = len(reads), len(writes)
	// Exclusion: every write against every other hold of another client.
	all := append(append([]Hold(nil), reads...), writes...)
	sort.Slice(all, func(i, j int) bool { return all[i].Start < all[j].Start })
	for i := range all {
		for j := i + 1; j < len(all) && all[j].Start < all[i].End; j++ {
			a, b := all[i], all[j]
			if a.Client == b.Client || a.End <= a.Start || b.End <= b.Start || (a.Kind == Read && b.Kind == Read) {
				continue
			}
			from, to := b.Start, min(a.End, b.End)
			r.judge("rw-exclusion", fmt.Sprintf("a %s hold of %s (token %d) and a %s hold of %s (token %d) overlapped for %v",
				a.Kind, a.Client, a.Token, b.Kind, b.Client, b.Token, time.Duration(to-from).Round(time.Millisecond)),
				[]string{describeHold(a), describeHold(b)}, ex.explains(b.Start, a))
		}
	}
	r.RWMaxReaders = maxTogether(reads)
	r.checkGrantTokens("rw-write-token", "write grant", writes, tokensRepeat)
	r.checkReadTokens(reads, writes, tokensRepeat)
}

// checkReadTokens: a read's token is at least that of every write seen
// granted before the read was called, and below that of every write
// called after the read was seen granted.
func (r *Result) checkReadTokens(reads, writes []Hold, tokensRepeat bool) {
	for _, rd := range reads {
		var lo, hi *Hold
		for i := range writes {
			w := &writes[i]
			if rd.Call != 0 && w.Start < rd.Call && (lo == nil || w.Token > lo.Token) {
				lo = w
			}
			if w.Call != 0 && w.Call > rd.Start && (hi == nil || w.Token < hi.Token) {
				hi = w
			}
		}
		switch {
		case lo != nil && rd.Token < lo.Token:
			r.judge("rw-read-token", fmt.Sprintf("a read of %s has token %d, below token %d of the write of %s it saw granted before it asked",
				rd.Client, rd.Token, lo.Token, lo.Client), []string{describeHold(*lo), describeHold(rd)}, tokensRepeat)
		case hi != nil && rd.Token >= hi.Token:
			r.judge("rw-read-token", fmt.Sprintf("a read of %s has token %d, not below token %d of the write of %s asked for after the read was granted",
				rd.Client, rd.Token, hi.Token, hi.Client), []string{describeHold(rd), describeHold(*hi)}, tokensRepeat)
		}
	}
}

// maxTogether is the most holds of hs valid at one instant.
func maxTogether(hs []Hold) int {
	type ev struct {
		at    int64
		delta int
	}
	var evs []ev
	for _, h := range hs {
		if h.End > h.Start {
			evs = append(evs, ev{h.Start, 1}, ev{h.End, -1})
		}
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].delta < evs[j].delta
	})
	n, best := 0, 0
	for _, e := range evs {
		n += e.delta
		best = max(best, n)
	}
	return best
}

// judge records an anomaly: a violation, or, where the store allows it by
// design, a count in ByDesign.
func (r *Result) judge(kind, msg string, win []string, byDesign bool) {
	if byDesign {
		if r.ByDesign == nil {
			r.ByDesign = map[string]int{}
		}
		r.ByDesign[kind]++
		return
	}
	r.violate(kind, msg, win)
}

// checkPrimsProgress: after the last heal, a semaphore grant and a
// read-write lock's read and write grant, each within bound, for the
// primitives the run used.
func (r *Result) checkPrimsProgress(h History, sem, reads, writes []Hold, bound time.Duration) {
	if h.LastHeal == 0 {
		return
	}
	type line struct {
		what  string
		holds []Hold
	}
	var lines []line
	if h.SemLimit > 0 {
		lines = append(lines, line{"semaphore grant", sem})
	}
	if h.RW {
		lines = append(lines, line{"read grant", reads}, line{"write grant", writes})
	}
	for _, l := range lines {
		first := int64(0)
		for _, x := range l.holds {
			if x.Start >= h.LastHeal && (first == 0 || x.Start < first) {
				first = x.Start
			}
		}
		took := time.Duration(first - h.LastHeal)
		if first != 0 {
			if r.PrimsRecovery == nil {
				r.PrimsRecovery = map[string]time.Duration{}
			}
			r.PrimsRecovery[l.what] = took
		}
		if bound > 0 && (first == 0 || took > bound) {
			msg := fmt.Sprintf("no %s within %v of the last heal", l.what, bound)
			if first != 0 {
				msg = fmt.Sprintf("the first %s after the last heal took %v (bound %v)", l.what, took, bound)
			}
			var win []string
			for _, f := range h.Faults {
				win = append(win, describeFault(f))
			}
			r.violate("progress", msg, win)
		}
	}
}

// primsSummary is the semaphore's and the read-write lock's part of
// Summary ("" when the run used neither).
func (r Result) primsSummary() string {
	var parts []string
	if r.SemLimit > 0 {
		parts = append(parts, fmt.Sprintf("semaphore (limit %d): holds %d, most permits held at once %d", r.SemLimit, r.SemHolds, r.SemMaxHeld))
	}
	if r.RWReads+r.RWWrites > 0 {
		parts = append(parts, fmt.Sprintf("rw: reads %d (at most %d together), writes %d", r.RWReads, r.RWMaxReaders, r.RWWrites))
	}
	if len(r.PrimsRecovery) > 0 {
		var ks []string
		for _, k := range []string{"semaphore grant", "read grant", "write grant"} {
			if d, ok := r.PrimsRecovery[k]; ok {
				ks = append(ks, fmt.Sprintf("%s %v", k, d.Round(time.Millisecond)))
			}
		}
		parts = append(parts, "first after the last heal: "+strings.Join(ks, ", "))
	}
	if len(r.ByDesign) > 0 {
		var ks []string
		for k, n := range r.ByDesign {
			ks = append(ks, fmt.Sprintf("%s %d", k, n))
		}
		sort.Strings(ks)
		parts = append(parts, "allowed by design: "+strings.Join(ks, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}
