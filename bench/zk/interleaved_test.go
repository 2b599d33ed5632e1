package zkbench

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock/bench/internal/lockbench"
	"github.com/distlock/distlock/bench/internal/measure"
)

// TestInterleaved measures uncontended acquire+release of both libraries
// and of the bare request sequence (create, list children, delete) in
// short interleaved batches, which load from other processes hits alike:
// steadier than whole benchmark rounds on a busy machine
// (go test -v -run TestInterleaved ./zk/).
func TestInterleaved(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	const batches, per = 30, 20
	conn, err := newConn()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	acl := zk.WorldACL(zk.PermAll)
	parent := "/bench/bare-" + lockbench.UniqueKey("interleaved")
	for _, p := range []string{"/bench", parent} {
		if _, err := conn.Create(p, nil, 0, acl); err != nil && err != zk.ErrNodeExists {
			t.Fatal(err)
		}
	}
	bare := func(context.Context, string) (func(context.Context) error, error) {
		p, err := conn.Create(parent+"/_c_0123456789abcdef0123456789abcdef-lock-", nil, zk.FlagEphemeralSequential, acl)
		if err != nil {
			return nil, err
		}
		if _, _, err := conn.Children(parent); err != nil {
			return nil, err
		}
		return func(context.Context) error { return conn.Delete(p, -1) }, nil
	}
	subjects := append([]measure.Library{{Name: "bare create+children+delete",
		Make: func() (measure.Contender, error) { return measure.AcquireFunc(bare), nil }}}, libraries...)
	means, err := measure.UncontendedRounds(context.Background(), subjects, batches, per, lockbench.UniqueKey("interleaved"))
	if err != nil {
		t.Fatal(err)
	}
	var out string
	ref := measure.Median(means["zk.Lock"])
	for _, s := range subjects {
		m := measure.Median(means[s.Name])
		out += fmt.Sprintf("  %-28s %9v per acquire+release (median of %d batches of %d)   / zk.Lock = %.2f\n", s.Name, m, batches, per, float64(m)/float64(ref))
	}
	fmt.Fprint(os.Stdout, "interleaved uncontended acquire+release:\n"+out)
}
