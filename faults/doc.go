// Package faults holds the history checker over random fault schedules
// (its tests; see docs/testing.md): several client processes per backend
// do fenced read-modify-writes on a register under the lock while a seeded
// schedule kills, stops, partitions and drops replies of clients and
// pauses and restarts servers, and package faults/internal/check judges
// the recorded history. Where the store offers them, the clients also take
// permits of a semaphore and both sides of a read-write lock under the
// same faults, and the checker judges those holds and their tokens.
// Clients come in two profiles (DISTLOCK_FAULTS_PROFILE): Lockers made by
// distlock.Open, and Lockers over a store client made the way a service
// makes it, with its library's defaults, passed to the backend package's
// New; a run with the latter begins by stalling one of them past the TTL
// while it holds, and the checker's late-loss rule requires every
// holder to have seen its lease's Done close by its Deadline().
package faults
