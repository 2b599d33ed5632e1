package backend

import (
	"context"
	"slices"
	"strings"
)

// ListHeld is the body of an Inspector.List whose store can name the keys that may
// be held but not their state in the same read: it inspects every one of
// keys (candidates read from the store, in any order, repeats allowed)
// that begins with prefix, in key order, and returns those held, at most
// limit (no bound when limit <= 0). A key freed between the read and its
// Inspect is left out.
func ListHeld(ctx context.Context, in Inspector, keys []string, prefix string, limit int) ([]Info, error) {
	keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return !strings.HasPrefix(k, prefix) })
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var out []Info
	for _, k := range keys {
		if limit > 0 && len(out) == limit {
			break
		}
		info, err := in.Inspect(ctx, k, Exclusive)
		if err != nil {
			return out, err
		}
		if info.Held {
			out = append(out, info)
		}
	}
	return out, nil
}
