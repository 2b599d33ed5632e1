// Package faults holds the history checker over random fault schedules
// (its tests; see docs/testing.md): several client processes per backend
// do fenced read-modify-writes on a register under the lock while a seeded
// schedule kills, stops, partitions and drops replies of clients and
// pauses and restarts servers, and package faults/internal/check judges
// the recorded history.
package faults
