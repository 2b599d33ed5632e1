package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// usageExits makes every misuse of the command exit 64 (ExitUsage): an
// unknown subcommand, arguments a subcommand does not take, an unknown help
// topic. Flag errors get there through root's FlagErrorFunc. Call it once
// every subcommand is added.
func usageExits(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	wrapArgs(root)
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			c.Run, c.RunE = nil, helpTopic
		}
	}
}

// wrapArgs makes the argument checks of c and its subcommands exit 64. A
// group of subcommands (root, completion) refuses an unknown one: cobra
// would show the group's help for it and exit 0.
func wrapArgs(c *cobra.Command) {
	if !c.Runnable() && c.HasSubCommands() {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknown("command", args[0], cmd)
			}
			return nil
		}
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	} else if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			var ee *exitError
			if err != nil && !errors.As(err, &ee) {
				return exitWith(ExitUsage, err)
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// helpTopic is `distlock help [CMD...]`, refusing a CMD that does not exist
// (cobra's own prints "Unknown help topic" and exits 0).
func helpTopic(c *cobra.Command, args []string) error {
	root := c.Root()
	target, _, err := root.Find(args)
	if err != nil || (target == root && len(args) > 0) {
		return unknown("help topic", strings.Join(args, " "), root)
	}
	target.InitDefaultHelpFlag()
	target.InitDefaultVersionFlag()
	return target.Help()
}

// unknown is the usage error for a name of kind what that group does not
// have, with cobra's suggestions.
func unknown(what, name string, group *cobra.Command) error {
	msg := fmt.Sprintf("unknown %s %q for %q", what, name, group.CommandPath())
	if group.SuggestionsMinimumDistance <= 0 {
		group.SuggestionsMinimumDistance = 2 // cobra's default, set lazily
	}
	if s := group.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return exitWith(ExitUsage, fmt.Errorf("%s; see %s --help", msg, group.CommandPath()))
}
