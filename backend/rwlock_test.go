package backend_test

import (
	"context"
	"strings"
	"testing"

	"github.com/distlock/distlock/backend"
)

type stubDriver struct{ caps backend.Capabilities }

func (d stubDriver) Capabilities() backend.Capabilities { return d.caps }
func (d stubDriver) TryAcquire(context.Context, backend.Request) (backend.Grant, error) {
	return backend.Grant{}, nil
}
func (d stubDriver) Close() error { return nil }

// stubRW has read-write locks that poll.
type stubRW struct{ stubDriver }

func (stubRW) TryAcquireRW(context.Context, backend.Request, backend.RWMode, bool) (backend.Grant, error) {
	return backend.Grant{}, nil
}
func (stubRW) WithdrawRW(context.Context, backend.Request) error { return nil }

func TestCapabilitiesCheckRW(t *testing.T) {
	caps := func(rw backend.WaitKind) backend.Capabilities {
		return backend.Capabilities{Name: "stub", Wait: backend.WaitPoll, Lifetime: backend.LifetimeTTL, RW: rw}
	}
	for _, tc := range []struct {
		name string
		d    backend.Driver
		want string // "" for no error
	}{
		{"none", stubDriver{caps("")}, ""},
		{"rw locker, poll", stubRW{stubDriver{caps(backend.WaitPoll)}}, ""},
		{"rw locker, not declared (offered in some modes only)", stubRW{stubDriver{caps("")}}, ""},
		{"declared, hidden by a wrapper", stubDriver{caps(backend.WaitNotify)}, ""},
		{"unknown kind", stubRW{stubDriver{caps("sometimes")}}, `unknown rw wait kind "sometimes"`},
		{"notify without SubscribeRW", stubRW{stubDriver{caps(backend.WaitNotify)}}, "no SubscribeRW"},
		{"queue without WaitRW", stubRW{stubDriver{caps(backend.WaitQueue)}}, "no WaitRW"},
	} {
		err := tc.d.Capabilities().Check(tc.d)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want no error", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if s := backend.Write.String() + "," + backend.Read.String() + "," + backend.RWMode(9).String(); s != "write,read,RWMode(9)" {
		t.Errorf("RWMode strings: %s", s)
	}
}
