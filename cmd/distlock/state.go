package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/distlock/distlock/backend"
)

// The state of a lock, a semaphore or a read-write lock, as status and
// list print it. This file and query.go are the only ones that read the
// backend's inspection types: the rest of the command uses the root
// package.

// stateJSON is the --json output of status, for every primitive, and of
// list, one line per lock: the same fields, meaning the same, whatever
// the primitive.
type stateJSON struct {
	Backend string `json:"backend"`
	Key     string `json:"key"`
	// Kind is "lock", "semaphore" or "rw" (a read-write lock).
	Kind string `json:"kind"`
	// Held: someone holds it (the lock, a permit, the write side or the
	// read side).
	Held bool `json:"held"`
	// Token is the highest fencing token among the holders; for a free
	// lock, the last one granted where the store tells; 0 if unknown.
	Token uint64 `json:"token"`
	// Holders are the grants held now, never null: a lock's holder, a
	// semaphore's grants in token order, a read-write lock's writer or
	// readers.
	Holders []holderJSON `json:"holders"`
	// PermitsHeld is a semaphore's permits held in all (semaphores only).
	PermitsHeld *int `json:"permits_held,omitempty"`
	// Waiters is the number of queued waiters, or -1 when the store does
	// not know (stores whose waiters poll or subscribe).
	Waiters int `json:"waiters"`
	// Forced is the store's record of the last forced release (release
	// --force), where the store keeps one.
	Forced *forcedJSON `json:"forced,omitempty"`
}

// holderJSON is one grant.
type holderJSON struct {
	Owner string `json:"owner"`
	// Value is what a lock's holder set beside it (an election leader's
	// Leadership.Proclaim), omitted when none.
	Value string `json:"value,omitempty"`
	// Mode is "exclusive" (a lock), "permits" (a semaphore's grant),
	// "write" or "read".
	Mode    string `json:"mode"`
	Permits int    `json:"permits,omitempty"` // a semaphore grant's permits
	Token   uint64 `json:"token"`             // 0 when the store cannot tell
	// TTL is the validity left when read (0: unknown), and Deadline the
	// time it ends, by this host's clock (RFC 3339, UTC; omitted when the
	// TTL is unknown).
	TTL      float64 `json:"ttl_seconds"`
	Deadline string  `json:"deadline,omitempty"`
}

// state is what status and list print, from any primitive's inspection.
type state struct {
	backend, key, kind string
	token              uint64
	holders            []backend.Holder
	modes              []string // holders[i]'s mode
	permitsHeld        int
	waiters            int
	read               time.Time       // when the store answered
	forced             *backend.Forced // the last forced release the store recorded (locks only)
	value              string          // the lock's holder's value (backend.Info.Value)
}

func lockState(name string, info backend.Info, read time.Time) state {
	st := state{backend: name, key: info.Key, kind: "lock", token: info.Token, waiters: info.Waiters, read: read, forced: info.Forced, value: info.Value}
	if info.Held {
		st.holders = []backend.Holder{{Owner: info.Owner, Token: info.Token, TTL: info.TTL}}
		st.modes = []string{"exclusive"}
	}
	return st
}

func semaphoreState(name, key string, info backend.Info, read time.Time) state {
	st := state{backend: name, key: key, kind: "semaphore", holders: info.Holders, permitsHeld: info.Permits, waiters: info.Waiters, read: read}
	for _, h := range info.Holders {
		st.modes = append(st.modes, "permits")
		st.token = max(st.token, h.Token)
	}
	return st
}

// rwState is the state of a read-write lock: the writer in Owner, Token
// and TTL, the readers in Holders (backend.Info for backend.Write).
func rwState(name, key string, info backend.Info, read time.Time) state {
	st := state{backend: name, key: key, kind: "rw", waiters: info.Waiters, read: read}
	if info.Owner != "" {
		st.holders, st.modes = []backend.Holder{{Owner: info.Owner, Token: info.Token, TTL: info.TTL}}, []string{"write"}
	}
	for _, h := range info.Holders {
		st.holders, st.modes = append(st.holders, h), append(st.modes, "read")
	}
	for _, h := range st.holders {
		st.token = max(st.token, h.Token)
	}
	return st
}

func (st state) held() bool { return len(st.holders) > 0 || st.permitsHeld > 0 }

// deadline is when h's validity ends, by this host's clock (zero: unknown).
func (st state) deadline(h backend.Holder) time.Time {
	if h.TTL <= 0 {
		return time.Time{}
	}
	return st.read.Add(h.TTL).UTC()
}

func (st state) json() stateJSON {
	out := stateJSON{Backend: st.backend, Key: st.key, Kind: st.kind, Held: st.held(), Token: st.token,
		Holders: []holderJSON{}, Waiters: st.waiters}
	if st.kind == "semaphore" {
		out.PermitsHeld = &st.permitsHeld
	}
	if f := st.forced; f != nil {
		out.Forced = &forcedJSON{By: f.By, Reason: f.Reason, At: f.At.UTC().Format(time.RFC3339Nano), Owner: f.Owner, Token: f.Token}
	}
	for i, h := range st.holders {
		hj := holderJSON{Owner: h.Owner, Mode: st.modes[i], Permits: h.Permits, Token: h.Token, TTL: h.TTL.Seconds()}
		if st.kind == "lock" {
			hj.Value = st.value
		}
		if d := st.deadline(h); !d.IsZero() {
			hj.Deadline = d.Format(time.RFC3339Nano)
		}
		out.Holders = append(out.Holders, hj)
	}
	return out
}

// print writes st for a person: one line, then a table of its holders
// when a semaphore or a read-write lock has any.
func (st state) print(w io.Writer) error {
	what := map[string]string{"lock": "", "semaphore": "semaphore ", "rw": "read-write lock "}[st.kind]
	switch {
	case !st.held() && st.kind == "lock":
		_, err := fmt.Fprintf(w, "%s: free (last token %d)%s%s\n", st.key, st.token, waitingNote(st.waiters), forcedNote(st.forced))
		return err
	case !st.held():
		_, err := fmt.Fprintf(w, "%s%s: free%s\n", what, st.key, waitingNote(st.waiters))
		return err
	case st.kind == "lock" || (st.kind == "rw" && st.modes[0] == "write"):
		h := st.holders[0]
		verb := map[string]string{"lock": "held", "rw": "written"}[st.kind]
		owner := h.Owner
		if st.kind == "lock" && st.value != "" {
			owner += " (value " + st.value + ")"
		}
		_, err := fmt.Fprintf(w, "%s%s: %s by %s, token %d, %s%s%s\n", what, st.key, verb, owner, h.Token, st.expiry(h), waitingNote(st.waiters), forcedNote(st.forced))
		return err
	case st.kind == "semaphore":
		fmt.Fprintf(w, "semaphore %s: %s held by %s%s\n", st.key, plural(st.permitsHeld, "permit"), plural(len(st.holders), "grant"), waitingNote(st.waiters))
	default:
		fmt.Fprintf(w, "read-write lock %s: read by %s%s\n", st.key, plural(len(st.holders), "owner"), waitingNote(st.waiters))
	}
	return st.printHolders(w)
}

// expiry says when h's validity ends: "expires in 2.5s (at 08:01:02.345Z)".
func (st state) expiry(h backend.Holder) string {
	d := st.deadline(h)
	if d.IsZero() {
		return "expiry unknown"
	}
	return fmt.Sprintf("expires in %v (at %s)", h.TTL.Round(time.Millisecond), d.Format("15:04:05.000Z"))
}

func (st state) printHolders(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	permits := st.kind == "semaphore"
	head := "  OWNER\tTOKEN\tEXPIRES IN\tDEADLINE"
	if permits {
		head = "  OWNER\tPERMITS\tTOKEN\tEXPIRES IN\tDEADLINE"
	}
	fmt.Fprintln(tw, head)
	for _, h := range st.holders {
		cols := []string{"  " + h.Owner}
		if permits {
			cols = append(cols, fmt.Sprint(h.Permits))
		}
		cols = append(cols, fmt.Sprint(h.Token), ttlText(h.TTL), deadlineText(st.deadline(h)))
		fmt.Fprintln(tw, joinTabs(cols))
	}
	return tw.Flush()
}

// printList writes one row per lock: key, owner, token, validity left,
// deadline and waiters.
func printList(w io.Writer, sts []state) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tOWNER\tTOKEN\tEXPIRES IN\tDEADLINE\tWAITING")
	for _, st := range sts {
		waiting := "?"
		if st.waiters >= 0 {
			waiting = fmt.Sprint(st.waiters)
		}
		h := backend.Holder{Token: st.token}
		if len(st.holders) > 0 {
			h = st.holders[0]
		}
		fmt.Fprintln(tw, joinTabs([]string{st.key, h.Owner, fmt.Sprint(h.Token), ttlText(h.TTL), deadlineText(st.deadline(h)), waiting}))
	}
	return tw.Flush()
}

func ttlText(ttl time.Duration) string {
	if ttl <= 0 {
		return "?"
	}
	return ttl.Round(time.Millisecond).String()
}

func deadlineText(d time.Time) string {
	if d.IsZero() {
		return "?"
	}
	return d.Format("15:04:05.000Z")
}

func joinTabs(cols []string) string { return strings.Join(cols, "\t") }

func waitingNote(waiters int) string {
	if waiters < 0 {
		return ""
	}
	return fmt.Sprintf(", %d waiting", waiters)
}

// plural is "1 permit", "2 permits".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// releaseJSON is the --json output of release --force.
type releaseJSON struct {
	Backend string `json:"backend"`
	Key     string `json:"key"`
	// Freed: the lock was held and is free now (false: it was free).
	Freed bool `json:"freed"`
	// Owner and Token are the holder it freed (Token 0 when unknown).
	Owner  string `json:"owner,omitempty"`
	Token  uint64 `json:"token,omitempty"`
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
}

func freedJSON(name, key, by, reason string, info backend.Info, freed bool) releaseJSON {
	return releaseJSON{Backend: name, Key: key, Freed: freed, Owner: info.Owner, Token: info.Token, By: by, Reason: reason}
}

// freedText is release --force's line: "job: forced free (was held by
// OWNER, token 7) by alice@ops:123".
func freedText(key, by string, info backend.Info) string {
	return fmt.Sprintf("%s: forced free (was held by %s, token %d) by %s", key, info.Owner, info.Token, by)
}

// forcedJSON is the store's record of the last forced release, in
// status and list output.
type forcedJSON struct {
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
	At     string `json:"at"` // RFC 3339, UTC, by the freeing host's clock
	Owner  string `json:"owner,omitempty"`
	Token  uint64 `json:"token,omitempty"`
}

// forcedNote is status's note of the last forced release:
// "; forced free by alice at 2026-12-02T13:40:00Z (stuck deploy), was
// OWNER token 7".
func forcedNote(f *backend.Forced) string {
	if f == nil {
		return ""
	}
	s := fmt.Sprintf("; forced free by %s at %s", f.By, f.At.UTC().Format(time.RFC3339))
	if f.Reason != "" {
		s += fmt.Sprintf(" (%s)", f.Reason)
	}
	if f.Owner != "" {
		s += fmt.Sprintf(", was held by %s token %d", f.Owner, f.Token)
	}
	return s
}
