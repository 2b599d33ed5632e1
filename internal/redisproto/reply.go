package redisproto

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// AcquireResult is the acquire script's reply.
type AcquireResult struct {
	Held    bool
	Token   uint64
	PTTL    time.Duration
	Counter uint64 // Redlock: the counter's value after the call
	Acked   int    // replicas that acknowledged (WAIT)
}

// AcquireReply reads the reply of AcquireScript or WaitScript run with
// TTL ttl: a lone integer is a fresh grant (freshGrant), anything else
// goes to parseAcquire.
func AcquireReply(cmd *redis.Cmd, ttl time.Duration) (AcquireResult, error) {
	v, err := cmd.Result()
	if err != nil {
		return AcquireResult{}, err
	}
	if token, ok := v.(int64); ok {
		return freshGrant(token, ttl)
	}
	vs, err := cmd.Int64Slice()
	if err != nil {
		return AcquireResult{}, err
	}
	return parseAcquire(vs)
}

// freshGrant is the reply of a script that took a free lock for its full
// TTL ttl and minted token, which it replies alone: the same as {1, token,
// ttl, token}.
func freshGrant(token int64, ttl time.Duration) (AcquireResult, error) {
	if token <= 0 {
		return AcquireResult{}, fmt.Errorf("unexpected reply %d from the acquire script", token)
	}
	pttl := time.Duration(min(Millis(ttl), MaxTTL.Milliseconds())) * time.Millisecond // as parseAcquire reads it
	return AcquireResult{Held: true, Token: uint64(token), PTTL: pttl, Counter: uint64(token)}, nil
}

func parseAcquire(v []int64) (AcquireResult, error) {
	if len(v) != 4 {
		return AcquireResult{}, fmt.Errorf("unexpected reply %v from the acquire script", v)
	}
	r := AcquireResult{Held: v[0] == 1, Token: uint64(v[1]), Counter: uint64(v[3])}
	if v[2] > 0 {
		r.PTTL = time.Duration(min(v[2], MaxTTL.Milliseconds())) * time.Millisecond
	}
	return r, nil
}

// Millis is d in whole milliseconds, rounded up so the store never keeps a
// lock for less than asked, and at least 1. It never overflows: the
// portable layer asks for at most backend.TTLLimit, and a duration within
// a millisecond of the largest one saturates instead of wrapping.
func Millis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return max(1, ms)
}

// ReleasedMemory is how long a freed lock remembers the hold released
// last, so that a release the client retried after losing the reply
// succeeds (go-redis retries within its read timeouts and backoff).
const ReleasedMemory = 10 * time.Second

// release runs ReleaseScript for hold of owner.
func ReleaseHold(ctx context.Context, c redis.Scripter, ks Keyset, owner, hold, mode string) (int64, error) {
	return ReleaseScript.Run(ctx, c, ks.ReleaseKeys(), ReleaseArgs(owner, hold, mode)...).Int64()
}

// ReleaseArgs are ReleaseScript's ARGV for hold of owner in mode
// ("release", "count", "quiet" or "abandon"): a plain release sends the
// hold alone, only "abandon" needs the owner (its place in the queue).
func ReleaseArgs(owner, hold, mode string) []any {
	switch mode {
	case "release":
		return []any{hold}
	case "abandon":
		return []any{hold, mode, owner}
	}
	return []any{hold, mode}
}

// PipelineRefresh runs RefreshScript in one pipeline for every lock of
// locks that is not the zero L (a nil pointer), to live ttls[i]; of gives
// a lock's keys, owner and hold. cmds[i] is nil where nothing ran; err is
// as PipelineScript's.
func PipelineRefresh[L comparable](ctx context.Context, c redis.UniversalClient, locks []L, ttls []time.Duration, of func(L) (ks Keyset, owner, hold string)) ([]*redis.Cmd, error) {
	var none L
	return PipelineScript(ctx, c, RefreshScript, len(locks), func(i int) ([]string, []any, bool) {
		if locks[i] == none {
			return nil, nil, false
		}
		ks, owner, hold := of(locks[i])
		return []string{ks.Lock}, []any{owner, Millis(ttls[i]), hold}, true
	})
}

// PipelineScript runs script n times in one pipeline, with the keys and
// args that call(i) gives (skipping i when it returns false). If Redis lost
// its script cache, it loads the script and runs the pipeline once more.
// cmds[i] is nil where nothing ran; err is the pipeline's transport error.
func PipelineScript(ctx context.Context, c redis.UniversalClient, s *redis.Script, n int, call func(int) ([]string, []any, bool)) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, n)
	run := func() error {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range n {
				if keys, args, ok := call(i); ok {
					cmds[i] = s.EvalSha(ctx, p, keys, args...)
				}
			}
			return nil
		})
		return err
	}
	err := run()
	noScript := false
	for _, cmd := range cmds {
		if cmd != nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			noScript = true
			break
		}
	}
	if !noScript {
		return cmds, transportErr(err, cmds)
	}
	if lerr := s.Load(ctx, c).Err(); lerr != nil {
		return cmds, lerr
	}
	err = run()
	return cmds, transportErr(err, cmds)
}

// transportErr keeps a pipeline's error only when no command has its own
// reply (the connection failed); per-command errors are read from the cmds.
func transportErr(err error, cmds []*redis.Cmd) error {
	if err == nil {
		return nil
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return nil
	}
	return err
}

// Heartbeat is how often a fair waiter renews its place for a lease of
// ttl; its liveness window is three heartbeats.
func Heartbeat(ttl time.Duration) time.Duration {
	return min(max(ttl/3, 50*time.Millisecond), time.Second)
}

// NewID names one hold or wait: 16 hex digits, unique with overwhelming
// probability among the holds of one lock.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// QueueEntry is WaitScript's ARGV[4] for a waiter that queues: its
// liveness window (ms), attempt number and inbox channel in one argument
// (Redis pays for each argument of a script on every run).
func QueueEntry(window time.Duration, attempt int, inbox string) string {
	return strconv.FormatInt(Millis(window), 10) + ":" + strconv.Itoa(attempt) + ":" + inbox
}
