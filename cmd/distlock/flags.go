package main

import (
	"errors"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/distlock/distlock/backend"
)

// urlFlag adds --url with $DISTLOCK_URL as its default. The help text shows
// that default with its password (and any secret parameter) hidden.
func urlFlag(cmd *cobra.Command, p *string) {
	def := os.Getenv("DISTLOCK_URL")
	cmd.Flags().StringVar(p, "url", def, "backend URL, e.g. redis://127.0.0.1:6379/0 (default $DISTLOCK_URL)")
	if def != "" {
		cmd.Flags().Lookup("url").DefValue = backend.RedactURL(def)
	}
}

// connectTimeoutFlag adds --connect-timeout: the bound on reaching the
// backend (Open, and the first request), after which distlock exits 69.
func connectTimeoutFlag(cmd *cobra.Command, p *time.Duration) {
	cmd.Flags().DurationVar(p, "connect-timeout", 30*time.Second, "bound on reaching the backend (exit 69 beyond it)")
}

func needURL(u string) error {
	if u == "" {
		return exitWith(ExitUsage, errors.New("no backend URL: give --url or set DISTLOCK_URL"))
	}
	return nil
}
