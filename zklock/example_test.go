package zklock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/distlock/distlock"
	_ "github.com/distlock/distlock/zklock"
)

// Bad zk:// URLs are rejected before anything is dialled, with an error
// naming every bad part and never the password.
func Example_badURL() {
	_, err := distlock.Open(context.Background(), "zk://app:secret@zk1:2181,zk2/locks/?session_timeout=fast&acl=all")
	fmt.Println(errors.Is(err, distlock.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// distlock: open zk://app:xxxxx@zk1:2181,zk2/locks/?acl=all&session_timeout=fast: zklock: invalid configuration: parameter session_timeout="fast": want a positive duration such as 30s or 500ms; parameter acl="all": want one of open, creator, creator-read
}
