//go:build linux

package faults

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/faults/internal/check"
	"github.com/distlock/distlock/memlock"
	"github.com/distlock/distlock/sandbox"
)

// Fault kinds.
const (
	fKill      = "kill"      // SIGKILL a client process; a new one takes its slot
	fStop      = "stop"      // SIGSTOP a client past its TTL, then SIGCONT
	fPause     = "pause"     // pause a server (SIGSTOP / docker pause), then resume
	fRestart   = "restart"   // stop a server, then start it again
	fPartition = "partition" // cut one client off the store, then heal
	fReplyLoss = "replyloss" // the store's next reply to one client is dropped
	fLeader    = "leader"    // kill the node that decides for the lock (ensemble or cluster leader, the key's primary), then start it again
	fStall     = "stall"     // a client in a long hold (renewals in flight) has its store path stalled both ways past the TTL, then healed
)

var allKinds = []string{fKill, fStop, fPause, fRestart, fPartition, fReplyLoss, fLeader, fStall}

// A step of a schedule: at At (from the run's start, or as soon as the
// previous step healed), inject Kind on client Slot or server Node, and
// heal after For.
type step struct {
	At   time.Duration
	Kind string
	Slot int
	Node int
	For  time.Duration
}

func (s step) String() string {
	return fmt.Sprintf("%8v %-9s client %d node %d for %v", s.At.Round(time.Millisecond), s.Kind, s.Slot, s.Node, s.For.Round(time.Millisecond))
}

// schedule draws the faults of a run from seed: one fault at a time,
// separated by gaps of 0.3-1.5 s, starting after 1 s and planned to begin
// before d. If stallSlot is a slot (not -1), the first fault is a stall
// of that slot's client (the one the user profile must survive: a
// holder's store stops answering for longer than the TTL).
func schedule(seed uint64, kinds []string, clients, nodes int, ttl, d time.Duration, stallSlot int) []step {
	rng := rand.New(rand.NewPCG(seed, 13))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	var out []step
	for at := time.Second; at < d && len(kinds) > 0 && len(out) < 1000; {
		s := step{At: at, Kind: kinds[rng.IntN(len(kinds))], Slot: rng.IntN(clients), Node: rng.IntN(max(nodes, 1))}
		if len(out) == 0 && stallSlot >= 0 {
			s.Kind, s.Slot = fStall, stallSlot
		}
		switch s.Kind {
		case fKill:
			s.For = between(200*time.Millisecond, time.Second) // until the new process starts
		case fStop:
			s.For = ttl + between(300*time.Millisecond, 1500*time.Millisecond)
		case fPause, fPartition:
			s.For = between(300*time.Millisecond, 2*ttl)
		case fRestart:
			s.For = between(200*time.Millisecond, time.Second)
		case fLeader:
			s.For = between(500*time.Millisecond, 2*ttl)
		case fReplyLoss:
			s.For = between(100*time.Millisecond, 500*time.Millisecond)
		case fStall:
			s.For = ttl + between(time.Second, 1500*time.Millisecond)
		}
		out = append(out, s)
		at += s.For + between(300*time.Millisecond, 1500*time.Millisecond)
	}
	return out
}

// A target is one backend configuration a run is made against.
type target struct {
	name string
	spec *sandbox.Spec // nil: mem, clients in this process
	// store names the user-made client its user profile builds
	// (user_test.go; "": none, as for mem).
	store string
	// url builds the client's lock URL from the addresses to dial.
	url func(addrs []string) string
	ttl time.Duration
	// byDesign: the store may double-grant on failover or restart
	// (Redis single node and Cluster); overlaps are reported as double
	// grants, not violations (and so are permits over the semaphore's
	// limit and a writer with another holder of the read-write lock).
	byDesign bool
	// tokensRepeat: the store's fencing tokens may repeat or go back
	// (Redis Cluster: a failover to a replica that missed the counter's
	// last increment, redis.md); the semaphore's and read-write lock's
	// token anomalies are counted, not violations.
	tokensRepeat bool
	// lostOnRestart: a server restart frees every lock at once and the
	// holders learn at their next renewal (SQL, docs/sql.md); overlaps a
	// restart explains are double grants, any other is a violation.
	lostOnRestart bool
	// noProxy: clients cannot dial through proxies (Redis Cluster clients
	// follow the addresses the cluster announces).
	noProxy bool
	// kinds, if set, limits the fault kinds.
	kinds []string
	// maxPause, if set, caps how long a server node is paused. etcd3:
	// a leader paused past the lease TTL revokes, when it resumes, leases
	// the new leader kept renewing (etcd-io/etcd#15247, still in 3.7;
	// docs/etcd.md "Failover"): a store bug no client can detect in
	// time, shown by etcdlock's opt-in TestStaleLeaderRevokesLiveLease
	// (DISTLOCK_ETCD_STALE_LEADER). Pauses up to half the TTL keep every
	// lease's remaining life (at least two thirds of the TTL after a
	// renewal) beyond the pause.
	maxPause time.Duration
	// wrap, for the meta-tests, wraps the mem driver.
	wrap func(backend.Driver) backend.Driver
	// acceptStale, for the meta-tests, breaks the register.
	acceptStale bool
}

const ttl = 2 * time.Second

// semLimit is the limit of the semaphore the clients share (each takes 1
// permit, or 2 one time in three).
const semLimit = 2

func withTTL(u string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "ttl=" + ttl.String()
}

func targets() []target {
	redis := func(extra string) func([]string) string {
		return func(a []string) string { return withTTL(sandbox.RedisURL(a...) + extra) }
	}
	return []target{
		{name: "mem", ttl: time.Second},
		{name: "redis", store: "redis", spec: &sandbox.Spec{Kind: sandbox.Redis, Persistent: true}, url: redis(""), ttl: ttl, byDesign: true},
		{name: "redlock", store: "redlock", spec: &sandbox.Spec{Kind: sandbox.Redis, Nodes: 3, Persistent: true}, url: redis("?mode=redlock"), ttl: ttl},
		{name: "redis-cluster", store: "redis-cluster", spec: &sandbox.Spec{Kind: sandbox.Redis, Topology: sandbox.Cluster, Replicas: 1}, url: redis(""), ttl: ttl, byDesign: true, tokensRepeat: true, noProxy: true},
		{name: "mysql", store: "mysql", spec: &sandbox.Spec{Kind: sandbox.MariaDB}, url: func(a []string) string { return withTTL(sandbox.MySQLURL(a[0])) }, ttl: ttl, lostOnRestart: true},
		{name: "postgres", store: "postgres", spec: &sandbox.Spec{Kind: sandbox.Postgres}, url: func(a []string) string { return withTTL(sandbox.PostgresURL(a[0])) }, ttl: ttl, lostOnRestart: true},
		// sqllock's session mode: many leases on 2 shared sessions.
		{name: "mysql-session", store: "mysql-session", spec: &sandbox.Spec{Kind: sandbox.MariaDB}, url: func(a []string) string { return withTTL(sandbox.MySQLURL(a[0])) + "&mode=session" }, ttl: ttl, lostOnRestart: true},
		{name: "postgres-session", store: "postgres-session", spec: &sandbox.Spec{Kind: sandbox.Postgres}, url: func(a []string) string { return withTTL(sandbox.PostgresURL(a[0])) + "&mode=session" }, ttl: ttl, lostOnRestart: true},
		{name: "zk", store: "zk", spec: &sandbox.Spec{Kind: sandbox.ZooKeeper}, url: func(a []string) string { return withTTL(sandbox.ZooKeeperURL(a...)) }, ttl: ttl},
		{name: "zk3", store: "zk", spec: &sandbox.Spec{Kind: sandbox.ZooKeeper, Nodes: 3}, url: func(a []string) string { return withTTL(sandbox.ZooKeeperURL(a...)) }, ttl: ttl},
		{name: "etcd", store: "etcd", spec: &sandbox.Spec{Kind: sandbox.Etcd}, url: func(a []string) string { return withTTL(sandbox.EtcdURL(a...)) }, ttl: ttl},
		{name: "etcd3", store: "etcd", spec: &sandbox.Spec{Kind: sandbox.Etcd, Nodes: 3}, url: func(a []string) string { return withTTL(sandbox.EtcdURL(a...)) }, ttl: ttl, maxPause: ttl / 2},
	}
}

// A client slot: one running client (a process, or for mem a goroutine).
type client interface {
	id() string
	kill()
	stop()
	cont()
	partition()
	heal()
	dropNextReply()
	shutdown()    // ends it gracefully (bounded), then by force
	exited() bool // the client is gone
	longHold()    // asks for a long hold as its next lock hold (a stall's victim)
}

type runConfig struct {
	seed     uint64
	clients  int
	duration time.Duration
	recovery time.Duration // the progress bound after the last heal
	profile  string        // which clients to make: profileOpen, profileUser or profileBoth
}

// profileBoth: half the slots (the odd ones) run user-made clients, the
// others Open's.
const profileBoth = "both"

// slotProfile is the profile of slot i's clients in r.
func (r *run) slotProfile(i int) string {
	if userStore(r.tg) == "" {
		return profileOpen
	}
	switch r.cfg.profile {
	case profileUser:
		return profileUser
	case profileBoth:
		if i%2 == 1 || r.cfg.clients == 1 {
			return profileUser
		}
	}
	return profileOpen
}

// run is one backend's run.
type run struct {
	t    *testing.T
	tg   target
	cfg  runConfig
	g    *sandbox.Group
	mem  *memlock.Store
	reg  *register
	key  string
	gens []int // per slot: processes started

	mu sync.Mutex
	// open holds by client and kind (openKey)
	open  map[string]*openHold
	holds []check.Hold
	// What the clients drive besides the lock (their "prims" records),
	// and when each kind of hold last started.
	semLimit  int
	rw        bool
	lastStart map[string]int64
	faults    []check.Fault
	counts    map[string]int
	notes     []string
	// dropped counts the replies the proxies lost.
	dropped atomic.Int64
	// longSeen: per client id, closed when it reports a long lock hold
	// (awaitLongHold).
	longSeen map[string]chan struct{}
	// profiles: per client id, its profile.
	profiles map[string]string
}

// awaitLongHold returns a channel closed when client id reports a long
// lock hold.
func (r *run) awaitLongHold(id string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.longSeen[id]
	if !ok {
		ch = make(chan struct{})
		r.longSeen[id] = ch
	}
	return ch
}

type openHold struct {
	h        check.Hold
	deadline int64
}

func openKey(client, kind string) string { return client + "/" + kind }

func (r *run) handle(x rec) {
	switch x.T {
	case "ret":
		r.reg.returned(x.C, x.S, x.At)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := openKey(x.C, x.P)
	switch x.T {
	case "prims":
		r.semLimit = max(r.semLimit, x.N)
		r.rw = r.rw || x.RW
	case "hold":
		r.open[k] = &openHold{h: check.Hold{Client: x.C, Kind: x.P, Permits: x.N, Token: x.Tok, Owner: x.Own, Call: x.Call, Start: x.At}}
		r.lastStart[x.P] = max(r.lastStart[x.P], x.At)
		if x.L {
			if ch, ok := r.longSeen[x.C]; ok {
				close(ch)
				delete(r.longSeen, x.C)
			} else {
				ch := make(chan struct{})
				close(ch)
				r.longSeen[x.C] = ch
			}
		}
	case "dl":
		if o := r.open[k]; o != nil {
			o.deadline = x.At
		}
	case "end":
		if o := r.open[k]; o != nil {
			o.h.End, o.h.Cut, o.h.Deadline, o.h.Believed = x.At, x.Cut, x.Dl, x.Bel
			r.holds = append(r.holds, o.h)
			delete(r.open, k)
		}
	}
}

// closeHold ends c's open holds, if any, each at the earlier of at and the
// last deadline it reported (its process died or the run ended).
func (r *run) closeHold(c string, at int64, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, o := range r.open {
		if o.h.Client != c {
			continue
		}
		o.h.End, o.h.Cut, o.h.Deadline = at, why, o.deadline // its belief since is unknown
		if o.deadline != 0 && o.deadline < at {
			o.h.End, o.h.Cut = o.deadline, why+"/deadline"
		}
		r.holds = append(r.holds, o.h)
		delete(r.open, k)
	}
}

// primsAfter reports whether every primitive the clients drive besides
// the lock was granted after t (unix ns): a semaphore grant, a read and a
// write.
func (r *run) primsAfter(t int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := r.semLimit == 0 || r.lastStart[check.Sem] > t
	return ok && (!r.rw || (r.lastStart[check.Read] > t && r.lastStart[check.Write] > t))
}

// nodeAddrs are the servers' current addresses.
func (r *run) nodeAddrs() []string { return r.g.Addrs() }

func (r *run) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, s)
}

// kinds are the fault kinds this run can inject, and why the others are
// left out.
func (r *run) kinds() (kinds []string, skipped []string) {
	for _, k := range allKinds {
		why := ""
		switch {
		case r.tg.kinds != nil && !contains(r.tg.kinds, k):
			why = "not asked for"
		case r.tg.spec == nil && k == fStop:
			why = "mem clients are goroutines"
		case r.tg.spec == nil && (k == fRestart || k == fReplyLoss):
			why = "no server"
		case r.tg.spec != nil && (k == fPartition || k == fReplyLoss) && r.tg.noProxy:
			why = "cluster clients follow announced addresses"
		case r.tg.spec != nil && k == fStall && r.tg.noProxy && !hasLeader(r.tg.spec):
			why = "clients bypass proxies and no one node serves the key"
		case r.tg.spec == nil && k == fStall:
			why = "mem clients dial no proxy"
		case k == fLeader && !hasLeader(r.tg.spec):
			why = "no leader: a single node or independent primaries"
		}
		if why == "" {
			kinds = append(kinds, k)
		} else {
			skipped = append(skipped, k+" ("+why+")")
		}
	}
	return kinds, skipped
}

// hasLeader reports whether spec's group has a node that decides for
// the others: a ZooKeeper ensemble or etcd cluster of several members, or
// a Redis Cluster (the key's primary).
func hasLeader(spec *sandbox.Spec) bool {
	if spec == nil {
		return false
	}
	multi := spec.Nodes > 1 && (spec.Kind == sandbox.ZooKeeper || spec.Kind == sandbox.Etcd)
	return multi || (spec.Kind == sandbox.Redis && spec.Topology == sandbox.Cluster)
}

// nameHash mixes a backend's name into the seed, so that backends get
// different schedules from one seed.
func nameHash(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// outcome is what one run produced.
type outcome struct {
	name    string
	seed    uint64
	plan    []step
	skipped []string
	counts  map[string]int
	res     check.Result
	report  string
	dropped int64
	// byProfile: per client profile, what its clients did and met.
	byProfile []profileOutcome
}

// execute runs tg under a seeded schedule and judges the history.
func execute(t *testing.T, tg target, cfg runConfig) outcome {
	r := &run{t: t, tg: tg, cfg: cfg, key: "faults", gens: make([]int, cfg.clients), open: map[string]*openHold{}, counts: map[string]int{}, lastStart: map[string]int64{},
		longSeen: map[string]chan struct{}{}, profiles: map[string]string{}}
	var err error
	r.reg, err = startRegister(tg.acceptStale)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.reg.Close() })
	nodes := 0
	if tg.spec == nil {
		r.mem = memlock.NewStore()
	} else {
		r.g = sandbox.StartT(t, *tg.spec)
		nodes = len(r.g.Nodes())
	}
	kinds, skipped := r.kinds()
	// A run with user-made clients begins with a stall of one of them
	// (the fault that showed issue 27's defect).
	stallSlot := -1
	if contains(kinds, fStall) {
		for i := range cfg.clients {
			if r.slotProfile(i) == profileUser {
				stallSlot = i
				break
			}
		}
	}
	plan := schedule(cfg.seed^nameHash(tg.name), kinds, cfg.clients, nodes, tg.ttl, cfg.duration, stallSlot)
	for i := range plan {
		if plan[i].Kind == fPause && tg.maxPause > 0 {
			plan[i].For = min(plan[i].For, tg.maxPause)
		}
	}

	clients := make([]client, cfg.clients)
	var cmu sync.Mutex
	shutdown := func() {
		cmu.Lock()
		defer cmu.Unlock()
		var wg sync.WaitGroup
		for _, c := range clients {
			if c != nil {
				wg.Go(c.shutdown)
			}
		}
		wg.Wait()
		clear(clients)
	}
	t.Cleanup(shutdown) // also when the test fails
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration+cfg.recovery+5*time.Minute)
	defer cancel()
	for i := range clients {
		c, err := r.startClient(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	start := time.Now()
	var lastHeal time.Time
	for _, s := range plan {
		if d := time.Until(start.Add(s.At)); d > 0 {
			time.Sleep(d)
		}
		inj := time.Now()
		target := fmt.Sprintf("client %s", clients[s.Slot].id())
		switch {
		case (s.Kind == fPause || s.Kind == fRestart) && r.g != nil:
			target = r.g.Node(s.Node).Name()
		case s.Kind == fPause:
			target = "the store"
		}
		began, err := r.inject(ctx, s, clients, &cmu)
		if err != nil {
			r.note(fmt.Sprintf("%s on %s: %v", s.Kind, target, err))
		}
		if !began.IsZero() {
			inj = began
		}
		lastHeal = time.Now()
		r.mu.Lock()
		r.faults = append(r.faults, check.Fault{Kind: s.Kind, Target: target, Start: inj.UnixNano(), End: lastHeal.UnixNano()})
		r.counts[s.Kind]++
		r.mu.Unlock()
	}
	if d := time.Until(start.Add(cfg.duration)); d > 0 {
		time.Sleep(d)
	}
	// Progress: wait (bounded) for a write accepted after the last heal,
	// and a grant of each other primitive, then a little longer.
	if !lastHeal.IsZero() {
		for until := time.Now().Add(cfg.recovery); time.Now().Before(until) && !(r.reg.writeAfter(lastHeal.UnixNano()) && r.primsAfter(lastHeal.UnixNano())); {
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(300 * time.Millisecond)
	shutdown()
	end := time.Now().UnixNano()
	r.mu.Lock()
	var left []string
	for _, o := range r.open {
		left = append(left, o.h.Client)
	}
	r.mu.Unlock()
	for _, c := range left {
		r.closeHold(c, end, "end")
	}
	r.mu.Lock()
	h := check.History{Ops: r.reg.history(), Holds: r.holds, Faults: r.faults, End: end, SemLimit: r.semLimit, RW: r.rw}
	if !lastHeal.IsZero() {
		h.LastHeal = lastHeal.UnixNano()
	}
	notes := r.notes
	profiles := maps.Clone(r.profiles)
	r.mu.Unlock()
	res := check.Check(h, check.Options{DoubleGrantsByDesign: tg.byDesign, TokensMayRepeat: tg.tokensRepeat, LostOnRestart: tg.lostOnRestart, RecoveryBound: cfg.recovery,
		LateAllowance: lateAllowance(tg.ttl)})
	var b strings.Builder
	res.Report(&b)
	for _, n := range notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, f := range h.Faults {
		fmt.Fprintf(&b, "fault %-9s %s: %s..%s\n", f.Kind, f.Target,
			time.Unix(0, f.Start).Format("15:04:05.000000"), time.Unix(0, f.End).Format("15:04:05.000000"))
	}
	return outcome{name: tg.name, seed: cfg.seed, plan: plan, skipped: skipped, counts: r.counts, res: res, report: b.String(), dropped: r.dropped.Load(),
		byProfile: perProfile(h, res, profiles, lateAllowance(tg.ttl))}
}

// lateAllowance is how long after its Deadline() a client may still
// believe it holds (the late-loss rule): the lease's timer and the
// client's watcher are scheduled on busy cores. The conformance suite's
// stall case allows the same.
func lateAllowance(ttl time.Duration) time.Duration { return max(100*time.Millisecond, ttl/10) }

// inject applies one step and heals it. began, if not zero, is when the
// fault began (a stall begins only once its victim holds).
func (r *run) inject(ctx context.Context, s step, clients []client, cmu *sync.Mutex) (began time.Time, err error) {
	cmu.Lock()
	c := clients[s.Slot]
	cmu.Unlock()
	sleep := func() {
		select {
		case <-ctx.Done():
		case <-time.After(s.For):
		}
	}
	nctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	switch s.Kind {
	case fKill:
		c.kill()
		sleep()
		nc, err := r.startClient(ctx, s.Slot)
		if err != nil {
			return time.Time{}, err
		}
		cmu.Lock()
		clients[s.Slot] = nc
		cmu.Unlock()
	case fStop:
		c.stop()
		sleep()
		c.cont()
	case fPartition:
		c.partition()
		sleep()
		c.heal()
	case fReplyLoss:
		c.dropNextReply()
		sleep()
	case fStall:
		// The victim's next lock hold is a long one (renewed, a
		// read-modify-write every quarter TTL); the stall begins once it
		// holds, so that a renewal goes out into it.
		// Clients that bypass proxies (Redis Cluster) are stalled by
		// pausing the node serving the key, which stalls every client of
		// that slot.
		primary := -1
		if r.tg.noProxy {
			var err error
			if primary, err = r.g.Leader(nctx, "{"+r.key+"}"); err != nil {
				return time.Time{}, err
			}
		}
		c.longHold()
		wait := 3 * r.tg.ttl
		select {
		case <-r.awaitLongHold(c.id()):
		case <-time.After(wait):
			r.note(fmt.Sprintf("%v stall: client %s reported no long hold within %v; stalled anyway", s.At.Round(time.Millisecond), c.id(), wait))
		case <-ctx.Done():
		}
		began = time.Now()
		if primary >= 0 {
			n := r.g.Node(primary)
			r.note(fmt.Sprintf("%v stall of client %s: by pausing %s, the key's primary", s.At.Round(time.Millisecond), c.id(), n.Name()))
			if err := n.Pause(nctx); err != nil {
				return began, err
			}
			sleep()
			return began, n.Resume(nctx)
		}
		c.partition()
		sleep()
		c.heal()
	case fPause:
		if r.g == nil {
			r.mem.SetAvailable(false)
			sleep()
			r.mem.SetAvailable(true)
			return time.Time{}, nil
		}
		n := r.g.Node(s.Node)
		if err := n.Pause(nctx); err != nil {
			return time.Time{}, err
		}
		sleep()
		return time.Time{}, n.Resume(nctx)
	case fRestart:
		return time.Time{}, r.restart(nctx, s.Node, sleep, sandbox.Node.Stop)
	case fLeader:
		// The key's hash tag: a Redis Cluster serves every key of the
		// lock from that tag's slot.
		leader, err := r.g.Leader(nctx, "{"+r.key+"}")
		if err != nil {
			return time.Time{}, err
		}
		r.note(fmt.Sprintf("%v leader: node %d killed", s.At.Round(time.Millisecond), leader))
		return time.Time{}, r.restart(nctx, leader, sleep, sandbox.Node.Kill)
	}
	return began, nil
}

// restart ends server node i with end (Stop: clean, Kill: SIGKILL), waits
// for the fault's duration, starts it again and waits for the group.
func (r *run) restart(ctx context.Context, i int, sleep func(), end func(sandbox.Node, context.Context) error) error {
	n := r.g.Node(i)
	if err := end(n, ctx); err != nil {
		return err
	}
	sleep()
	if err := n.Start(ctx); err != nil {
		return err
	}
	return r.g.Wait(ctx)
}

func (o outcome) counted() string {
	var ks []string
	for k := range o.counts {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s=%d", k, o.counts[k]))
		if k == fReplyLoss {
			parts[len(parts)-1] += fmt.Sprintf(" (replies lost %d)", o.dropped)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func (o outcome) schedule() string {
	var b strings.Builder
	for _, s := range o.plan {
		fmt.Fprintf(&b, "    %s\n", s)
	}
	return b.String()
}
