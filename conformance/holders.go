package conformance

import (
	"testing"
	"time"
)

// The cases about a holder cut off from its store (a partition, a stall, a
// crash, a lost reply) run twice: with the holder's Locker over the
// harness's own driver, and over a driver on a client made the way a user
// makes it (UserClients). Such a client keeps its library's defaults (its
// own retries, timeouts and reconnects, and a driver that learns of its
// connection's state by looking, not by being told), which is where a
// driver's handling of a lost session or reply has gone wrong before
// (zklock, 22ce45c: a lock granted in the connection's next session was
// left locking its key after its Release). The other Lockers of such a
// case (rivals, observers) are the harness's.

// noUserClients is the reason a user-client part does not run.
const noUserClients = "the harness makes no driver over a user-made client (no conformance.UserClients)"

// holderParts runs fn as two parts of the case: "harness-client", a holds
// over e.locker; "user-client", a holds over a driver on a user-made
// client, skipped (in a bubble: left out, with a log line) when the
// harness has no UserClients. Each part has a key prefix of its own.
func (e *env) holderParts(t *testing.T, fn func(t *testing.T, e *env, a *client)) {
	e.part(t, "harness-client", func(t *testing.T) {
		e := e.sub("h")
		fn(t, e, e.locker(t))
	})
	e.part(t, "user-client", func(t *testing.T) {
		if _, ok := e.h.(UserClients); !ok {
			if e.virtual { // the part runs in the case's own t: a Skip would skip the case
				t.Logf("part user-client left out: %s", noUserClients)
				return
			}
			t.Skip(noUserClients)
		}
		e := e.sub("u")
		fn(t, e, e.userLocker(t))
	})
}

// userLocker makes a Locker, reporting to a probe, over a new driver on a
// user-made client; the harness must implement UserClients.
func (e *env) userLocker(t *testing.T) *client {
	t.Helper()
	d, err := e.h.(UserClients).NewUserDriver(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatalf("NewUserDriver: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return e.lockerOver(t, d)
}
