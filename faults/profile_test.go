//go:build linux

package faults

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/distlock/distlock/faults/internal/check"
)

// profileOutcome is what the clients of one profile did and met in a run.
type profileOutcome struct {
	profile    string
	clients    int
	holds      map[string]int // by kind
	accepted   int            // register operations accepted
	rejected   int
	latest     time.Duration // the latest any of its clients believed it held, relative to the lease's Deadline() (negative: before it), stopped clients left out
	known      bool          // latest is known (a hold with both times)
	stalls     []string      // what each stall of one of its clients did
	violations map[string]int
}

var clientID = regexp.MustCompile(`\b[cu][0-9]+\.[0-9]+\b`)

// involved returns the client ids a violation names: in its message, or
// failing that in its window.
func involved(v check.Violation) []string {
	if ids := clientID.FindAllString(v.Msg, -1); len(ids) > 0 {
		return ids
	}
	return clientID.FindAllString(strings.Join(v.Window, "\n"), -1)
}

// perProfile splits a run's figures by client profile (profiles: per
// client id).
func perProfile(h check.History, res check.Result, profiles map[string]string, allowance time.Duration) []profileOutcome {
	var out []profileOutcome
	for _, p := range []string{profileOpen, profileUser} {
		o := profileOutcome{profile: p, holds: map[string]int{}, violations: map[string]int{}}
		for _, q := range profiles {
			if q == p {
				o.clients++
			}
		}
		if o.clients == 0 {
			continue
		}
		for _, x := range h.Holds {
			if profiles[x.Client] != p {
				continue
			}
			o.holds[x.Kind]++
			if x.Believed != 0 && x.Deadline != 0 && !check.Stopped(h.Faults, x.Client, x.Deadline, x.Believed) {
				d := time.Duration(x.Believed - x.Deadline)
				if !o.known || d > o.latest {
					o.latest, o.known = d, true
				}
			}
		}
		for _, op := range h.Ops {
			if profiles[op.Client] != p {
				continue
			}
			if op.OK {
				o.accepted++
			} else {
				o.rejected++
			}
		}
		for _, f := range h.Faults {
			id, ok := strings.CutPrefix(f.Target, "client ")
			if f.Kind != fStall || !ok || profiles[id] != p {
				continue
			}
			o.stalls = append(o.stalls, describeStall(h, f, id, allowance))
		}
		for _, v := range res.Violations {
			ids := involved(v)
			if v.Kind == "late-loss" && len(ids) > 0 {
				ids = ids[:1] // the late holder; the others are its rivals
			}
			for _, id := range ids {
				if profiles[id] == p {
					o.violations[v.Kind]++
					break
				}
			}
		}
		out = append(out, o)
	}
	return out
}

// describeStall says how the stalled client's lock hold ended relative
// to its deadline, and when a rival was granted.
func describeStall(h check.History, f check.Fault, id string, allowance time.Duration) string {
	head := fmt.Sprintf("stall of %s for %v", id, time.Duration(f.End-f.Start).Round(time.Millisecond))
	var x *check.Hold
	for i := range h.Holds {
		y := &h.Holds[i]
		if y.Client == id && y.Kind == check.Lock && y.Start <= f.Start && (y.End >= f.Start || y.Believed >= f.Start) {
			x = y
		}
	}
	if x == nil {
		return head + ": it held no lock when the stall began"
	}
	if x.Believed == 0 || x.Deadline == 0 {
		return head + fmt.Sprintf(": its lock hold (token %d) ended %s, belief unknown", x.Token, x.Cut)
	}
	late := time.Duration(x.Believed - x.Deadline)
	verdict := "in time"
	if late > allowance {
		verdict = "LATE"
	}
	s := head + fmt.Sprintf(": its lock hold (token %d, %s) ended %+v from its Deadline() (%s; %v into the stall)",
		x.Token, x.Cut, late.Round(time.Millisecond), verdict, time.Duration(x.Believed-f.Start).Round(time.Millisecond))
	var next *check.Hold
	for i := range h.Holds {
		y := &h.Holds[i]
		if y.Client != id && y.Kind == check.Lock && y.Start > f.Start && (next == nil || y.Start < next.Start) {
			next = y
		}
	}
	if next != nil {
		s += fmt.Sprintf("; next grant %s (token %d) %+v from that deadline", next.Client, next.Token, time.Duration(next.Start-x.Deadline).Round(time.Millisecond))
	}
	return s
}

func (o profileOutcome) String() string {
	var ks []string
	for k := range o.holds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var hs []string
	total := 0
	for _, k := range ks {
		name := k
		if k == check.Lock {
			name = "lock"
		}
		hs = append(hs, fmt.Sprintf("%s %d", name, o.holds[k]))
		total += o.holds[k]
	}
	latest := "n/a"
	if o.known {
		latest = fmt.Sprintf("%+v", o.latest.Round(time.Millisecond))
	}
	vs := "none"
	if len(o.violations) > 0 {
		var parts []string
		for k, n := range o.violations {
			parts = append(parts, fmt.Sprintf("%s=%d", k, n))
		}
		sort.Strings(parts)
		vs = strings.Join(parts, " ")
	}
	how := "distlock.Open(URL)"
	if o.profile == profileUser {
		how = "user-made client + New"
	}
	s := fmt.Sprintf("%-4s (%s): %d client processes, holds %d (%s), ops accepted %d rejected %d, latest belief vs Deadline() %s, violations involving them: %s",
		o.profile, how, o.clients, total, strings.Join(hs, ", "), o.accepted, o.rejected, latest, vs)
	for _, st := range o.stalls {
		s += "\n        " + st
	}
	return s
}
