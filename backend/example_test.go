package backend_test

import (
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock/backend"
)

// An Opener (what a driver registers for its URL scheme) reads its
// parameters with Params, then calls Err, which names every bad value and
// every parameter nobody read in one error. Redacted is the form to put in
// messages: the password, and any parameter value not known to be
// harmless (SafeParams), are masked; Err does not show those values either.
func ExampleParseURL() {
	u, err := backend.ParseURL("queue://app:secret@q1:7000,q2/locks?ttl=5s&retries=ten&colour=blue")
	if err != nil {
		log.Fatal(err)
	}
	ttl := u.Query.Duration("ttl", 30*time.Second)
	retries := u.Query.Int("retries", 3, 0, 10)
	if len(u.Hosts) == 0 {
		u.Query.Fail("want at least one host") // the Opener's own checks
	}
	fmt.Println(u.Scheme, u.Hosts, u.Path, u.Username(), ttl, retries)
	fmt.Println(u.HostsWithDefaultPort(7000))
	fmt.Println(u.Redacted())

	err = u.Query.Err()
	fmt.Println(errors.Is(err, backend.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// queue [q1:7000 q2] /locks app 5s 3
	// [q1:7000 q2:7000]
	// queue://app:xxxxx@q1:7000,q2/locks?colour=xxxxx&retries=xxxxx&ttl=5s
	// true
	// invalid configuration: parameter retries: want an integer from 0 to 10; unknown parameter(s): colour
}
