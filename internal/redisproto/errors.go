package redisproto

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// CleanupTimeout bounds the owner-checked cleanup after an acquisition
// whose outcome is unknown.
const CleanupTimeout = time.Second

// IgnoreClosed is err, or nil when it says the client was closed already.
func IgnoreClosed(err error) error {
	if errors.Is(err, redis.ErrClosed) {
		return nil
	}
	return err
}

// NotAllowed reports whether Redis refused the client's credentials or
// permissions (a wrong password, a disabled user, a missing ACL command or
// key pattern): a configuration error that no retry fixes. A script refused
// one of its commands only after the ones before it ran; Redis's own
// refusal of scripts with missing permissions happens before they start.
func NotAllowed(err error) bool {
	// go-redis wraps a refusal met while connecting ("failed to
	// authenticate: WRONGPASS ..."), so look for the code anywhere.
	msg := err.Error()
	return strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH ") || strings.Contains(msg, "NOPERM ")
}

// AlsoFailed is err, and what failed after it (a cleanup, leaving a
// queue) if anything did, in one line.
func AlsoFailed(err, after error) error {
	if after == nil {
		return err
	}
	return fmt.Errorf("%w (and: %w)", err, after)
}

// LoginRefused reports whether Redis refused the client's login: no
// password where one is wanted (NOAUTH) or a wrong user or password, or a
// disabled user (WRONGPASS).
func LoginRefused(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH ")
}

// ScriptRefused reports whether the ACL refused a command inside a script
// (Redis 7.0: "The user executing the script can't run this command or
// subcommand", "... can't publish to the channel ...", "... can't access
// at least one of the keys ..."; Redis 7.2 and later: "ACL failure in
// script: ..."): also a configuration error, but the commands before it
// ran.
func ScriptRefused(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "user executing the script can't") || strings.Contains(msg, "ACL failure in script")
}
