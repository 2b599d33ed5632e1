package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"
)

// urlFlag adds --url with $DISTLOCK_URL as its default.
func urlFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "url", os.Getenv("DISTLOCK_URL"), "backend URL, e.g. redis://127.0.0.1:6379/0 (default $DISTLOCK_URL)")
}

func needURL(u string) error {
	if u == "" {
		return exitWith(ExitUsage, errors.New("no backend URL: give --url or set DISTLOCK_URL"))
	}
	return nil
}
