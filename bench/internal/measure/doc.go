// Package measure is the one measurement core of the lock comparisons:
// distlock-bench (bench/internal/compare) and every peer
// comparison in the bench module take their figures from it, so a p99
// from one can be set beside a p99 from the other.
//
// It measures [Contender]s (one lock client each, as one process would
// hold it) made by a [Library]:
//
//   - [Contend]: workers contend for one key for a while; the
//     [Contention] holds every wait, each hand-off gap (from a release's
//     start to the next grant), each release, each worker's share of the
//     grants, overtakes of the queue order, and overlaps (two holders at
//     once: a broken lock);
//   - [ContendRounds] and [UncontendedRounds]: the same for several
//     libraries in rounds whose order rotates ([Rotate]), so that load
//     from other processes hits every library alike;
//   - [Pairs]: acquire + release of a free key, timed pair by pair
//     ([PairsTimed]: on a clock the caller gives);
//   - [Recovery]: how long a waiter needs to get a lock whose holder died.
//
// Every percentile is [Percentile]'s: nearest rank, no interpolation.
// docs/cli.md ("How figures are computed") states the definitions for
// readers of the reports.
//
// The package uses the standard library only.
package measure
