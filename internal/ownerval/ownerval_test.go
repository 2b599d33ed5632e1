package ownerval

import "testing"

func TestJoinSplit(t *testing.T) {
	for _, c := range []struct{ owner, value string }{{"a.0123", "replica-b:8080"}, {"o", ""}} {
		o, v := Split(Join(c.owner, c.value))
		if o != c.owner || v != c.value {
			t.Errorf("Split(Join(%q, %q)) = %q, %q", c.owner, c.value, o, v)
		}
	}
	if o, v := Split([]byte("plain-owner")); o != "plain-owner" || v != "" {
		t.Errorf("Split of an owner alone = %q, %q", o, v)
	}
}
