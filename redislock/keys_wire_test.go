package redislock

import (
	"slices"
	"testing"

	"github.com/distlock/distlock/internal/redisproto"
)

// TestKeysOnTheWire pins the Redis names of every primitive's keys, byte
// for byte, as released versions wrote them: a driver that names a key
// differently does not see the locks an older one holds, so two versions
// running side by side during an upgrade would both grant the same lock.
// Change a name here only with a migration.
func TestKeysOnTheWire(t *testing.T) {
	d := &Driver{opts: Options{Prefix: DefaultPrefix}}
	for _, c := range []struct {
		key  string
		want []string // mutex: lock fence channel queue alive last; rw: hash readers fence channel gone; semaphore: grants permits fence channel released
	}{
		{"orders", []string{"distlock:{orders}:lock", "distlock:{orders}:fence", "distlock:{orders}:released", "distlock:{orders}:queue", "distlock:{orders}:alive", "distlock:{orders}:last", "distlock:{orders}:rw", "distlock:{orders}:rw-readers", "distlock:{orders}:rw-fence", "distlock:{orders}:rw-released", "distlock:{orders}:rw-gone", "distlock:sem:{orders}:grants", "distlock:sem:{orders}:permits", "distlock:sem:{orders}:fence", "distlock:sem:{orders}:released", "distlock:sem:{orders}:gone"}},
		{"", []string{"distlock:{}:lock", "distlock:{}:fence", "distlock:{}:released", "distlock:{}:queue", "distlock:{}:alive", "distlock:{}:last", "distlock:{}:rw", "distlock:{}:rw-readers", "distlock:{}:rw-fence", "distlock:{}:rw-released", "distlock:{}:rw-gone", "distlock:sem:{}:grants", "distlock:sem:{}:permits", "distlock:sem:{}:fence", "distlock:sem:{}:released", "distlock:sem:{}:gone"}},
		{"a/b", []string{"distlock:{a/b}:lock", "distlock:{a/b}:fence", "distlock:{a/b}:released", "distlock:{a/b}:queue", "distlock:{a/b}:alive", "distlock:{a/b}:last", "distlock:{a/b}:rw", "distlock:{a/b}:rw-readers", "distlock:{a/b}:rw-fence", "distlock:{a/b}:rw-released", "distlock:{a/b}:rw-gone", "distlock:sem:{a/b}:grants", "distlock:sem:{a/b}:permits", "distlock:sem:{a/b}:fence", "distlock:sem:{a/b}:released", "distlock:sem:{a/b}:gone"}},
		{"100%", []string{"distlock:{100%25}:lock", "distlock:{100%25}:fence", "distlock:{100%25}:released", "distlock:{100%25}:queue", "distlock:{100%25}:alive", "distlock:{100%25}:last", "distlock:{100%25}:rw", "distlock:{100%25}:rw-readers", "distlock:{100%25}:rw-fence", "distlock:{100%25}:rw-released", "distlock:{100%25}:rw-gone", "distlock:sem:{100%25}:grants", "distlock:sem:{100%25}:permits", "distlock:sem:{100%25}:fence", "distlock:sem:{100%25}:released", "distlock:sem:{100%25}:gone"}},
		{"%7B", []string{"distlock:{%257B}:lock", "distlock:{%257B}:fence", "distlock:{%257B}:released", "distlock:{%257B}:queue", "distlock:{%257B}:alive", "distlock:{%257B}:last", "distlock:{%257B}:rw", "distlock:{%257B}:rw-readers", "distlock:{%257B}:rw-fence", "distlock:{%257B}:rw-released", "distlock:{%257B}:rw-gone", "distlock:sem:{%257B}:grants", "distlock:sem:{%257B}:permits", "distlock:sem:{%257B}:fence", "distlock:sem:{%257B}:released", "distlock:sem:{%257B}:gone"}},
		{"{a}", []string{"distlock:{%7Ba%7D}:lock", "distlock:{%7Ba%7D}:fence", "distlock:{%7Ba%7D}:released", "distlock:{%7Ba%7D}:queue", "distlock:{%7Ba%7D}:alive", "distlock:{%7Ba%7D}:last", "distlock:{%7Ba%7D}:rw", "distlock:{%7Ba%7D}:rw-readers", "distlock:{%7Ba%7D}:rw-fence", "distlock:{%7Ba%7D}:rw-released", "distlock:{%7Ba%7D}:rw-gone", "distlock:sem:{%7Ba%7D}:grants", "distlock:sem:{%7Ba%7D}:permits", "distlock:sem:{%7Ba%7D}:fence", "distlock:sem:{%7Ba%7D}:released", "distlock:sem:{%7Ba%7D}:gone"}},
		{"a}b{", []string{"distlock:{a%7Db%7B}:lock", "distlock:{a%7Db%7B}:fence", "distlock:{a%7Db%7B}:released", "distlock:{a%7Db%7B}:queue", "distlock:{a%7Db%7B}:alive", "distlock:{a%7Db%7B}:last", "distlock:{a%7Db%7B}:rw", "distlock:{a%7Db%7B}:rw-readers", "distlock:{a%7Db%7B}:rw-fence", "distlock:{a%7Db%7B}:rw-released", "distlock:{a%7Db%7B}:rw-gone", "distlock:sem:{a%7Db%7B}:grants", "distlock:sem:{a%7Db%7B}:permits", "distlock:sem:{a%7Db%7B}:fence", "distlock:sem:{a%7Db%7B}:released", "distlock:sem:{a%7Db%7B}:gone"}},
		{"ключ", []string{"distlock:{ключ}:lock", "distlock:{ключ}:fence", "distlock:{ключ}:released", "distlock:{ключ}:queue", "distlock:{ключ}:alive", "distlock:{ключ}:last", "distlock:{ключ}:rw", "distlock:{ключ}:rw-readers", "distlock:{ключ}:rw-fence", "distlock:{ключ}:rw-released", "distlock:{ключ}:rw-gone", "distlock:sem:{ключ}:grants", "distlock:sem:{ключ}:permits", "distlock:sem:{ключ}:fence", "distlock:sem:{ключ}:released", "distlock:sem:{ключ}:gone"}},
		{"a b", []string{"distlock:{a b}:lock", "distlock:{a b}:fence", "distlock:{a b}:released", "distlock:{a b}:queue", "distlock:{a b}:alive", "distlock:{a b}:last", "distlock:{a b}:rw", "distlock:{a b}:rw-readers", "distlock:{a b}:rw-fence", "distlock:{a b}:rw-released", "distlock:{a b}:rw-gone", "distlock:sem:{a b}:grants", "distlock:sem:{a b}:permits", "distlock:sem:{a b}:fence", "distlock:sem:{a b}:released", "distlock:sem:{a b}:gone"}},
		{".", []string{"distlock:{.}:lock", "distlock:{.}:fence", "distlock:{.}:released", "distlock:{.}:queue", "distlock:{.}:alive", "distlock:{.}:last", "distlock:{.}:rw", "distlock:{.}:rw-readers", "distlock:{.}:rw-fence", "distlock:{.}:rw-released", "distlock:{.}:rw-gone", "distlock:sem:{.}:grants", "distlock:sem:{.}:permits", "distlock:sem:{.}:fence", "distlock:sem:{.}:released", "distlock:sem:{.}:gone"}},
		{"..", []string{"distlock:{..}:lock", "distlock:{..}:fence", "distlock:{..}:released", "distlock:{..}:queue", "distlock:{..}:alive", "distlock:{..}:last", "distlock:{..}:rw", "distlock:{..}:rw-readers", "distlock:{..}:rw-fence", "distlock:{..}:rw-released", "distlock:{..}:rw-gone", "distlock:sem:{..}:grants", "distlock:sem:{..}:permits", "distlock:sem:{..}:fence", "distlock:sem:{..}:released", "distlock:sem:{..}:gone"}},
		{"%2F", []string{"distlock:{%252F}:lock", "distlock:{%252F}:fence", "distlock:{%252F}:released", "distlock:{%252F}:queue", "distlock:{%252F}:alive", "distlock:{%252F}:last", "distlock:{%252F}:rw", "distlock:{%252F}:rw-readers", "distlock:{%252F}:rw-fence", "distlock:{%252F}:rw-released", "distlock:{%252F}:rw-gone", "distlock:sem:{%252F}:grants", "distlock:sem:{%252F}:permits", "distlock:sem:{%252F}:fence", "distlock:sem:{%252F}:released", "distlock:sem:{%252F}:gone"}},
		{"x:{y}:lock", []string{"distlock:{x:%7By%7D:lock}:lock", "distlock:{x:%7By%7D:lock}:fence", "distlock:{x:%7By%7D:lock}:released", "distlock:{x:%7By%7D:lock}:queue", "distlock:{x:%7By%7D:lock}:alive", "distlock:{x:%7By%7D:lock}:last", "distlock:{x:%7By%7D:lock}:rw", "distlock:{x:%7By%7D:lock}:rw-readers", "distlock:{x:%7By%7D:lock}:rw-fence", "distlock:{x:%7By%7D:lock}:rw-released", "distlock:{x:%7By%7D:lock}:rw-gone", "distlock:sem:{x:%7By%7D:lock}:grants", "distlock:sem:{x:%7By%7D:lock}:permits", "distlock:sem:{x:%7By%7D:lock}:fence", "distlock:sem:{x:%7By%7D:lock}:released", "distlock:sem:{x:%7By%7D:lock}:gone"}},
		{"a*b?[c]", []string{"distlock:{a*b?[c]}:lock", "distlock:{a*b?[c]}:fence", "distlock:{a*b?[c]}:released", "distlock:{a*b?[c]}:queue", "distlock:{a*b?[c]}:alive", "distlock:{a*b?[c]}:last", "distlock:{a*b?[c]}:rw", "distlock:{a*b?[c]}:rw-readers", "distlock:{a*b?[c]}:rw-fence", "distlock:{a*b?[c]}:rw-released", "distlock:{a*b?[c]}:rw-gone", "distlock:sem:{a*b?[c]}:grants", "distlock:sem:{a*b?[c]}:permits", "distlock:sem:{a*b?[c]}:fence", "distlock:sem:{a*b?[c]}:released", "distlock:sem:{a*b?[c]}:gone"}},
		{"\x00\xff", []string{"distlock:{\x00\xff}:lock", "distlock:{\x00\xff}:fence", "distlock:{\x00\xff}:released", "distlock:{\x00\xff}:queue", "distlock:{\x00\xff}:alive", "distlock:{\x00\xff}:last", "distlock:{\x00\xff}:rw", "distlock:{\x00\xff}:rw-readers", "distlock:{\x00\xff}:rw-fence", "distlock:{\x00\xff}:rw-released", "distlock:{\x00\xff}:rw-gone", "distlock:sem:{\x00\xff}:grants", "distlock:sem:{\x00\xff}:permits", "distlock:sem:{\x00\xff}:fence", "distlock:sem:{\x00\xff}:released", "distlock:sem:{\x00\xff}:gone"}},
	} {
		ks, rw, sem := redisproto.KeysFor(DefaultPrefix, c.key), d.rwKeys(c.key), d.semKeys(c.key)
		got := []string{ks.Lock, ks.Fence, ks.Channel, ks.Queue, ks.Alive, ks.Last,
			rw.hash, rw.readers, rw.fence, rw.channel, rw.gone,
			sem.grants, sem.permits, sem.fence, sem.channel, sem.released}
		if !slices.Equal(got, c.want) {
			t.Errorf("key %q: names\n %q\nwant\n %q", c.key, got, c.want)
		}
		if k, ok := redisproto.KeyOf(DefaultPrefix, c.want[0]); !ok || k != c.key {
			t.Errorf("KeyOf(%q) = %q, %v; want %q", c.want[0], k, ok, c.key)
		}
	}
}
