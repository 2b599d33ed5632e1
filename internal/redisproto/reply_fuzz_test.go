package redisproto

import (
	"testing"
	"time"
)

// FuzzParseAcquire: any reply an acquire script could be made to return
// (by a server of another version, or a hostile one) is parsed without a
// panic; a reply of the wrong shape is an error, never a grant, and a
// negative remaining TTL never becomes a wait.
func FuzzParseAcquire(f *testing.F) {
	f.Add(4, int64(1), int64(7), int64(1000), int64(6))
	f.Add(4, int64(0), int64(0), int64(-2), int64(0))
	f.Add(3, int64(1), int64(1), int64(1), int64(1))
	f.Add(5, int64(1), int64(-1), int64(-1), int64(-1))
	f.Add(4, int64(0), int64(0), int64(1<<62), int64(0))
	f.Fuzz(func(t *testing.T, n int, held, token, pttl, counter int64) {
		if n < 0 || n > 8 {
			return
		}
		v := []int64{held, token, pttl, counter, 0, 0, 0, 0}[:n]
		r, err := parseAcquire(v)
		if n != 4 {
			if err == nil || r.Held {
				t.Fatalf("reply %v of %d values: %+v, %v; want an error", v, n, r, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("reply %v: %v", v, err)
		}
		if r.Held != (held == 1) {
			t.Errorf("reply %v: held = %v", v, r.Held)
		}
		if r.PTTL < 0 || r.PTTL > MaxTTL || (pttl <= 0 && r.PTTL != 0) || (pttl > 0 && pttl <= MaxTTL.Milliseconds() && r.PTTL != time.Duration(pttl)*time.Millisecond) {
			t.Errorf("reply %v: pttl %v", v, r.PTTL)
		}
	})
}

// FuzzFreshGrant: a lone integer reply (a script that took a free lock) is
// a grant of that token for the TTL asked, with the counter at the token;
// a token that is not positive is an error, never a grant.
func FuzzFreshGrant(f *testing.F) {
	f.Add(int64(1), int64(time.Second))
	f.Add(int64(0), int64(time.Second))
	f.Add(int64(-5), int64(time.Millisecond))
	f.Add(int64(1<<62), int64(MaxTTL))
	f.Fuzz(func(t *testing.T, token, ttl int64) {
		d := time.Duration(ttl)
		if d < MinTTL || d > MaxTTL {
			return
		}
		r, err := freshGrant(token, d)
		if token <= 0 {
			if err == nil || r.Held {
				t.Fatalf("token %d: %+v, %v; want an error", token, r, err)
			}
			return
		}
		if err != nil || !r.Held || r.Token != uint64(token) || r.Counter != uint64(token) || r.PTTL < d || r.PTTL >= d+time.Millisecond {
			t.Fatalf("token %d, ttl %v: %+v, %v", token, d, r, err)
		}
	})
}
