package zklock

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestParseName: parseName accepts exactly the names nodeName makes from a
// guid newGUID makes and a sequence number ZooKeeper writes.
func TestParseName(t *testing.T) {
	g := newGUID()
	for _, seq := range []int64{0, 1, 42, 2147483647, 9999999999} {
		name := nodeName(g, seq)
		gotG, gotSeq, ok := parseName(name)
		if !ok || gotG != g || gotSeq != seq {
			t.Errorf("parseName(%q) = %q, %d, %v; want %q, %d", name, gotG, gotSeq, ok, g, seq)
		}
	}
	for _, name := range append(hostileNames(), "", "junk", "_c_", "_c_"+g+"-lock-", "_c_"+g+"-lock-0000000000 ", "_c_"+g+"-lock-\u0660000000000") {
		if _, _, ok := parseName(name); ok {
			t.Errorf("parseName(%q) accepted a name the driver never makes", name)
		}
	}
}

// FuzzParseName: parseName never panics, accepts only what nodeName makes
// (from a 32-hex-digit lower-case guid and a 10-digit sequence number), and
// every name nodeName makes from such parts parses back to them.
func FuzzParseName(f *testing.F) {
	f.Fuzz(func(t *testing.T, name string, id []byte, seq uint32) {
		if g, s, ok := parseName(name); ok {
			if got := nodeName(g, s); got != name {
				t.Fatalf("parseName(%q) = %q, %d, but nodeName gives %q", name, g, s, got)
			}
			if b, err := hex.DecodeString(g); err != nil || len(b) != guidLen/2 || hex.EncodeToString(b) != g {
				t.Fatalf("parseName(%q) accepted guid %q, which newGUID cannot make", name, g)
			}
			if s < 0 {
				t.Fatalf("parseName(%q) accepted a negative sequence %d", name, s)
			}
		}
		var raw [guidLen / 2]byte
		copy(raw[:], id)
		g := hex.EncodeToString(raw[:])
		s := int64(seq % (1 << 31)) // ZooKeeper's counter is a non-negative int32
		name = nodeName(g, s)
		if gotG, gotS, ok := parseName(name); !ok || gotG != g || gotS != s {
			t.Fatalf("round trip of %q/%d: %q, %d, %v", g, s, gotG, gotS, ok)
		}
		if err := validZKPath(defaultBase + "/k/" + name); err != nil {
			t.Fatalf("node name %q: %v", name, err)
		}
	})
}

// validZKPath applies the server's rules (org.apache.zookeeper.common.
// PathUtils.validatePath) to a non-sequential path.
func validZKPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case p[0] != '/':
		return fmt.Errorf("path %q does not start with /", p)
	case p == "/":
		return nil
	case strings.HasSuffix(p, "/"):
		return fmt.Errorf("path %q ends with /", p)
	case !utf8.ValidString(p):
		return fmt.Errorf("path %q is not UTF-8", p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return fmt.Errorf("path %q has an empty segment", p)
		case ".", "..":
			return fmt.Errorf("path %q has a relative segment", p)
		}
	}
	for _, r := range p {
		// Java strings are UTF-16: a rune above U+FFFF is a surrogate pair,
		// which the server rejects too.
		if r <= 0x1f || r >= 0x7f && r <= 0x9f || r >= 0xd800 && r <= 0xf8ff || r >= 0xfff0 {
			return fmt.Errorf("path %q has character %U", p, r)
		}
	}
	return nil
}
