// Package compare runs the same lock workloads against several targets
// side by side, and returns their [Result]s. It is the engine of the
// distlock-bench command; package render turns results into a table, CSV,
// JSON, SVG charts and one self-contained HTML page. The engine knows no
// command line: a program gives it a [Config], its [Target]s, and calls
// [HolderMain] first thing in main so that crash-recovery can run a
// holder process of its own.
//
// A [Target] is distlock on one store, another lock library on it (a peer,
// made by package peers), or the store's bare round trip (its floor). Every
// workload runs [Config.Rounds] times on every target, in rotated orders;
// a [Result] gives each metric's median round with its min and max.
//
// Workloads:
//
//   - uncontended: one client acquires and releases one key in a loop
//     (latency p50/p99). A store's targets run together, taking turns of
//     10 pairs in an order rotated every turn, so that a slow phase of
//     the machine hits them alike; then each counts alone, untimed, what
//     a pair costs (round trips, the server's requests and fsyncs);
//   - contended: N clients (each its own Locker, as separate processes
//     would be) compete for one key (acquisitions/s, hand-off latency from
//     a release to the next holder, each client's wait p50/p99/max and its
//     share of acquisitions), checking mutual exclusion as they go;
//   - many-keys: N clients each lock a key of their own (acquisitions/s);
//   - semaphore: M clients share one semaphore of P permits
//     (acquisitions/s, waits, the most permits seen held at once, checked
//     against P); distlock alone, a backend without a semaphore listed as
//     unsupported;
//   - rw: M clients share one read-write lock, R% of their acquisitions
//     reads (read and write acquisitions/s, read and write waits, the most
//     readers seen at once, violations: a writer seen with anyone);
//     distlock alone, a backend without native read-write locks listed as
//     unsupported;
//   - crash-recovery: a holder is killed (a holder process, [HolderMain], with
//     SIGKILL, a peer's connections cut) and a waiter measures how long
//     until it gets the lock.
//
// Every loop is bounded in count and time. The timing, percentiles and
// shares come from bench/internal/measure, the core the peer comparisons of the
// bench module use too; docs/cli.md says how each figure is computed.
package compare
