package sqllock

import "testing"

// advisoryKey is a fixed function of (table, key): a change would let two
// versions of the driver take different locks for one key during a
// rolling upgrade. Tables are namespaces, and the separator keeps
// ("ab", "c") and ("a", "bc") apart.
func TestAdvisoryKey(t *testing.T) {
	if got, want := advisoryKey("distlock_locks", "orders/42"), advisoryKey("distlock_locks", "orders/42"); got != want {
		t.Fatalf("not deterministic: %d, %d", got, want)
	}
	seen := map[int64]string{}
	for _, tk := range [][2]string{{"t", "k"}, {"u", "k"}, {"t", "k2"}, {"ab", "c"}, {"a", "bc"}, {"t", ""}} {
		k := advisoryKey(tk[0], tk[1])
		if prev, dup := seen[k]; dup {
			t.Errorf("%v and %s share advisory key %d", tk, prev, k)
		}
		seen[k] = tk[0] + "/" + tk[1]
	}
	if got := bindPG("SELECT pg_advisory_xact_lock(?)", advisoryKey("t", "k")); got[:len("SELECT pg_advisory_xact_lock(")] != "SELECT pg_advisory_xact_lock(" {
		t.Errorf("bind: %q", got)
	}
}

// bindPG writes strings as decode('hex', 'hex') and integers in decimal.
func TestBindPG(t *testing.T) {
	for _, tc := range []struct {
		q    string
		args []any
		want string
	}{
		{"a = ?", []any{"key"}, "a = decode('6b6579', 'hex')"},
		{"a = ?", []any{""}, "a = decode('', 'hex')"},
		{"a = ? AND b = ?", []any{[]byte{0, 0x27}, int64(-5)}, "a = decode('0027', 'hex') AND b = -5"},
		{"'?s'", []any{7}, "'7s'"},
		{"?", []any{uint64(1) << 63}, "9223372036854775808"},
	} {
		if got := bindPG(tc.q, tc.args...); got != tc.want {
			t.Errorf("bindPG(%q, %v) = %q, want %q", tc.q, tc.args, got, tc.want)
		}
	}
}
