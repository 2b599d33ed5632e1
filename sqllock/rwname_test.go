package sqllock_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/sqllock"
)

// rwNameCollision checks that the read-write lock of a key too long to be
// named as is (its name holds the key's SHA-256 in hexadecimal) and that
// of a short key spelling "#" and that hash are two locks: both write
// sides can be held at once.
func rwNameCollision(t *testing.T, d *sqllock.Driver) {
	long := uniqueKey("rwname") + strings.Repeat("x", 1024)
	long = long[:1024]
	h := sha256.Sum256([]byte(long))
	short := "#" + hex.EncodeToString(h[:])
	g, err := d.TryAcquire(ctxFor(t, 10*time.Second), kindReq(rwReq(long, "a"), backend.Write, false))
	if err != nil {
		t.Fatal(err)
	}
	defer releaseGrant(t, g)
	g2, err := d.TryAcquire(ctxFor(t, 10*time.Second), kindReq(rwReq(short, "b"), backend.Write, false))
	if err != nil {
		t.Fatalf("write side of %q while the write side of a 1024-byte key is held: %v (the two keys share one lock)", short, err)
	}
	releaseGrant(t, g2)
}

// TestRWNameCollision: different keys never address the same read-write
// lock, even a short key that spells a long key's hashed name.
func TestRWNameCollision(t *testing.T) {
	eachDialect(t, mysqlProc|allPG, func(t *testing.T, d *dialect) {
		dr, _ := d.newDriver(t, d.server(t), sqllock.Options{})
		rwNameCollision(t, dr)
	})
}
