package sqllock

import "testing"

func TestBind(t *testing.T) {
	for _, tc := range []struct {
		q    string
		args []any
		want string
	}{
		{"SELECT 1", nil, "SELECT 1"},
		{"WHERE name = ?", []any{"a' OR '1'='1"}, "WHERE name = X'6127204f52202731273d2731'"},
		{"VALUES (?, ?, ?)", []any{"?", []byte{0, 0xff}, ""}, "VALUES (X'3f', X'00ff', X'')"},
		{"SET a = ?, b = ?, c = ?", []any{30, int64(-1), uint64(1) << 63}, "SET a = 30, b = -1, c = 9223372036854775808"},
	} {
		if got := bind(tc.q, tc.args...); got != tc.want {
			t.Errorf("bind(%q, %v) = %q, want %q", tc.q, tc.args, got, tc.want)
		}
	}
	long := make([]byte, 1000)
	for i := range long {
		long[i] = byte(i)
	}
	if got := bind("?", long); len(got) != 3+2*len(long) || got[:4] != "X'00" || got[len(got)-3:] != "e7'" {
		t.Errorf("bind of %d bytes: %q...", len(long), got[:10])
	}
	for _, bad := range []func(){
		func() { bind("?") },
		func() { bind("x", 1) },
		func() { bind("?", 1.5) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic for a mismatched bind")
				}
			}()
			bad()
		}()
	}
}
