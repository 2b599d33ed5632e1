// Package memlock is the in-process distlock backend: a lock store that
// lives in the memory of one process. It is the reference implementation of
// the backend contract (it passes the whole conformance suite) and what to
// use in your own unit tests instead of a server.
//
// # URLs
//
//	mem://            the process-wide default store
//	mem://NAME        a named process-wide store, shared by every Open of it
//	mem://?wait=queue waiters queue in FIFO order (also: notify, the default; poll)
//
// # Semantics
//
// Each lock has its own TTL and fencing token (one counter for the whole
// store, so tokens grow per key too). Waiters sleep until a release is
// announced (notify), queue in the store (queue), or poll. Two Drivers
// acquiring with the same owner both hold the lock; the store counts them.
//
// Semaphores (distlock.Locker.Semaphore) are native: each grant of
// permits has its own TTL and token; waiters for permits sleep until a
// release is announced, or poll (wait=poll), unordered.
//
// Stores hold nothing outside the process, so memlock protects nothing
// across processes: it is for tests and single-process programs.
//
// Read-write locks (distlock.RWMutex) are native, with the same rules as
// the stores' (a waiting writer keeps new readers out).
//
// # Errors
//
// A Store can be made unavailable (SetAvailable), a lock deleted behind its
// holder's back (Delete), and a Driver killed as if its process died
// (Kill), so tests can exercise outage and loss handling. A Driver can
// also be cut off reversibly (Partition, Heal), putting its leases in
// doubt, stalled as a black hole under a client that ignores ctx (Stall,
// Heal: its calls block until healed, and nothing is reported), or lose its
// next reply (DropNextReply). The examples here, and
// distlock's ExampleLease_State, show them in use.
package memlock
