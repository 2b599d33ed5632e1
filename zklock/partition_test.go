package zklock

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
)

// TestFollowerCutAfterRenewal: a renewal's validity must end before the
// leader can expire the session, even when the follower the holder talks
// to is cut off from the leader (and only from it) right after answering
// the renewal.
//
// A follower forwards a client's sync to the leader, but the leader moves
// a session's expiry only when the follower reports the sessions it heard
// from, in its replies to the leader's pings (every tickTime/2); forwarded
// requests touch nothing there. So once the follower is cut off, the
// leader's last touch of the session is the holder's request before the
// renewal (go-zookeeper pings every third of the timeout), reported up to
// tickTime/2 later, and the leader expires the session one timeout after
// that, while the follower, which does not notice the cut for syncLimit
// ticks, keeps answering the holder's pings. The test times the renewal
// just before the holder's next ping (the previous request is then about
// a third of the timeout old), cuts the follower's connections to the
// leader with iptables right after it, and checks that a second client,
// on the leader, is granted the lock only after the holder's validity
// ended. A validity counted as the renewal's send time plus the whole
// timeout fails it by about a third of the timeout.
func TestFollowerCutAfterRenewal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cuts loopback connections with iptables: needs root")
	}
	if err := exec.Command("iptables", "-w", "-L", "OUTPUT", "-n").Run(); err != nil {
		t.Skipf("cuts loopback connections with iptables, which does not work here: %v", err)
	}
	c := startCluster(t, 3)
	if p := c.g.Provider(); p != "local" {
		// The members' own connections are in the containers' network
		// namespaces there, out of reach of the host's loopback rules.
		t.Skipf("cuts the members' loopback connections on the host: local provider only (this group: %s; the local pass of CI runs it)", p)
	}
	if err := c.g.Wait(ctxFor(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	leader := leaderIndex(t, c)
	f := (leader + 1) % 3
	addrs := c.g.Addrs()
	key := uniqueKey(t)
	const session = 2500 * time.Millisecond
	a := newClientAt(t, c, session, addrs[f:f+1])
	b := newClientAt(t, c, 20*time.Second, addrs[leader:leader+1])

	// Watch a's pings (go-zookeeper sends one every third of the session
	// timeout, whatever else it sends) on its proxy to the follower.
	var lastPing atomic.Int64
	ping := []byte{0, 0, 0, 8, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 11} // length 8, xid -2, opPing
	for _, p := range a.k.proxies {
		p.DropReply(func(chunk []byte) bool {
			if bytes.HasSuffix(chunk, ping) {
				lastPing.Store(time.Now().UnixNano())
			}
			return false // never drops anything: only watches
		}, nil)
	}

	cut, n := cutPeers(t, c, f, leader)

	// Acquire just after one of a's pings and renew just before the next,
	// so that a's last request before the renewal is about a third of the
	// timeout old.
	every := session / 3
	seen := lastPing.Load()
	for i := 0; lastPing.Load() == seen; i++ {
		if i == 400 {
			t.Fatal("no ping from a seen in 4 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p := time.Unix(0, lastPing.Load())
	la, err := a.Acquire(ctxFor(t, 10*time.Second), key, distlock.WithoutAutoRenew())
	if err != nil {
		t.Fatal(err)
	}
	acquired := time.Now()
	time.Sleep(time.Until(p.Add(every - 80*time.Millisecond)))
	renewed := time.Now()
	if err := la.Refresh(ctxFor(t, time.Second), 0); err != nil {
		t.Fatalf("a's renewal: %v", err)
	}
	cut()
	deadline := la.Deadline()
	t.Logf("renewed %v after a's acquisition; cut %d connections %v later; a's validity: %v after the renewal",
		renewed.Sub(acquired).Round(time.Millisecond), n,
		time.Since(renewed).Round(time.Millisecond), deadline.Sub(renewed).Round(time.Millisecond))

	granted := grantedAt(t, b, key) // through the leader
	tb, ok := <-granted
	if !ok {
		t.Fatal("b never got the lock")
	}
	t.Logf("b was granted the lock %v after a's renewal; a's lease: %v", tb.Sub(renewed).Round(time.Millisecond), la.Err())
	if tb.Before(deadline) {
		t.Errorf("b was granted the lock %v before a's validity ended (a renewed through a follower cut off from the leader right after)",
			deadline.Sub(tb).Round(time.Millisecond))
	}
}

// cutPeers returns a func that drops, with iptables rules removed when
// the test ends, every connection established now between ensemble
// members i and j (quorum and election), in both directions, and how many
// connections that is. Other members and clients are not touched, nor are
// connections made later.
func cutPeers(t *testing.T, c *cluster, i, j int) (func(), int) {
	t.Helper()
	pid := func(addr string) string {
		port := portOf(addr)
		for _, l := range ssLines(t, "-Htlnp") {
			if f := strings.Fields(l); len(f) >= 6 && portOf(f[3]) == port {
				if m := pidRE.FindStringSubmatch(l); m != nil {
					return m[1]
				}
			}
		}
		t.Fatalf("no process listens on %s", addr)
		return ""
	}
	listens := func(p string) map[string]bool {
		ports := map[string]bool{}
		for _, l := range ssLines(t, "-Htlnp") {
			if m := pidRE.FindStringSubmatch(l); m != nil && m[1] == p {
				ports[portOf(strings.Fields(l)[3])] = true
			}
		}
		return ports
	}
	pi, pj := pid(c.g.Node(i).Addr()), pid(c.g.Node(j).Addr())
	li, lj := listens(pi), listens(pj)
	tag := "distlock-test-" + strconv.Itoa(os.Getpid())
	var rules []string
	n := 0
	for _, l := range ssLines(t, "-Htnp", "state", "established") {
		m := pidRE.FindStringSubmatch(l)
		f := strings.Fields(l)
		if m == nil || len(f) < 4 {
			continue
		}
		local, peer := portOf(f[2]), portOf(f[3])
		if !(m[1] == pi && lj[peer]) && !(m[1] == pj && li[peer]) {
			continue
		}
		for _, ports := range [][2]string{{local, peer}, {peer, local}} {
			rules = append(rules, "OUTPUT -o lo -p tcp --sport "+ports[0]+" --dport "+ports[1]+" -m comment --comment "+tag+" -j DROP")
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no connection found between members %d (pid %s) and %d (pid %s)", i, pi, j, pj)
	}
	// One iptables-restore applies them all at once.
	apply := func(op string) error {
		var in strings.Builder
		in.WriteString("*filter\n")
		for _, r := range rules {
			in.WriteString(op + " " + r + "\n")
		}
		in.WriteString("COMMIT\n")
		cmd := exec.Command("iptables-restore", "-w", "--noflush")
		cmd.Stdin = strings.NewReader(in.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("iptables-restore %s: %v: %s", op, err, out)
		}
		return nil
	}
	return func() {
		if err := apply("-I"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := apply("-D"); err != nil {
				t.Error(err)
			}
		})
	}, n
}

var pidRE = regexp.MustCompile(`pid=(\d+)`)

// portOf returns the port of an ss address (127.0.0.1:2181,
// [::ffff:127.0.0.1]:2181, *:2181).
func portOf(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }

func ssLines(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("ss", args...).Output()
	if err != nil {
		t.Fatalf("ss %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
