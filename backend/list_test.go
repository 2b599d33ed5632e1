package backend

import (
	"context"
	"errors"
	"testing"
)

type fakeInspector map[string]bool

func (f fakeInspector) List(context.Context, string, int) ([]Info, error) { return nil, ErrUnsupported }

func (f fakeInspector) ForceRelease(context.Context, string, Forced) (Info, error) {
	return Info{}, ErrUnsupported
}

func (f fakeInspector) Inspect(_ context.Context, key string, _ Kind) (Info, error) {
	if key == "broken" {
		return Info{}, errors.New("unavailable")
	}
	return Info{Key: key, Held: f[key]}, nil
}

// ListHeld keeps the held keys under the prefix, once each, sorted, within
// the limit.
func TestListHeld(t *testing.T) {
	in := fakeInspector{"a/1": true, "a/2": false, "a/3": true, "b/1": true, "a/4": true}
	got, err := ListHeld(context.Background(), in, []string{"a/3", "b/1", "a/1", "a/2", "a/3", "a/4"}, "a/", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Key != "a/1" || got[1].Key != "a/3" {
		t.Errorf("ListHeld = %+v, want a/1 and a/3", got)
	}
	if _, err := ListHeld(context.Background(), in, []string{"broken"}, "", 0); err == nil {
		t.Error("an Inspect error is not returned")
	}
}
