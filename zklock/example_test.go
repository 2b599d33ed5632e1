package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/zklock"
)

// Bad zk:// URLs are rejected before anything is dialled, with an error
// naming every bad part and never the password.
func Example_badURL() {
	_, err := distlock.Open(context.Background(), "zk://app:secret@zk1:2181,zk2/locks/?session_timeout=fast&acl=all")
	fmt.Println(errors.Is(err, distlock.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// distlock: open zk://app:xxxxx@zk1:2181,zk2/locks/?acl=all&session_timeout=fast: zklock: invalid configuration: parameter session_timeout="fast": want from 100ms to 24h, a duration such as 30s or 500ms; parameter acl="all": want one of open, creator, creator-read
}

// Build the driver over a connection the program already has. Every lock
// lives as long as the connection's session, so Options.SessionTimeout must
// be the timeout given to zk.Connect (and allowed by the servers'
// minSessionTimeout and maxSessionTimeout). The driver fails fast while
// the connection has no session, so wait for one first. It never closes
// the connection: close it after the Locker, which ends the session.
func ExampleNew() {
	const sessionTimeout = 10 * time.Second
	conn, events, err := zk.Connect([]string{"zk-1:2181", "zk-2:2181", "zk-3:2181"}, sessionTimeout)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for session := false; !session; {
		select {
		case ev := <-events:
			session = ev.State == zk.StateHasSession
		case <-ctx.Done():
			log.Fatal("no ZooKeeper session: ", ctx.Err())
		}
	}

	d, err := zklock.New(conn, &zklock.Options{Base: "/app/locks", SessionTimeout: sessionTimeout})
	if err != nil {
		log.Fatal(err)
	}
	locker := distlock.New(d) // owns d, not conn
	defer locker.Close()

	err = locker.Do(ctx, "exports/daily", func(ctx context.Context) error {
		fmt.Println("exporting") // ctx ends if the lock is lost
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
