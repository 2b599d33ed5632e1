// Package compare runs the same lock workloads against several backends
// side by side and reports the results as a table, CSV, JSON, SVG charts
// and one self-contained HTML page. It is the engine of `distlock bench`.
//
// Workloads:
//
//   - uncontended: one client acquires and releases one key in a loop
//     (latency p50/p99);
//   - contended: N clients (each its own Locker, as separate processes
//     would be) compete for one key (acquisitions/s, hand-off latency from
//     a release to the next holder, each client's wait p50/p99/max and its
//     share of acquisitions), checking mutual exclusion as they go;
//   - many-keys: N clients each lock their own keys (acquisitions/s);
//   - crash-recovery: a holder process is killed with SIGKILL and a waiter
//     measures how long until it gets the lock.
//
// Every loop is bounded in count and time. The timing, percentiles and
// shares come from internal/measure, the core the peer comparisons of the
// bench module use too; docs/cli.md says how each figure is computed.
package compare
