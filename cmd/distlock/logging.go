package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
)

// logger is the command's logger, set from --log-level before a
// subcommand runs. Every log line of the library, its drivers and the
// store clients (go-redis and the MySQL driver log through process-wide
// loggers, which the command owns) goes through it, to stderr.
var logger = slog.New(slog.DiscardHandler)

// logLevels are the values --log-level accepts.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// addLogFlag adds --log-level to root and sets the loggers up before any
// subcommand runs.
func addLogFlag(root *cobra.Command) {
	level := root.PersistentFlags().String("log-level", "warn", "log to stderr at this level and above: debug, info, warn, error or off")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		return setupLogging(*level)
	}
}

// setupLogging makes logger write at level and above to stderr ("off":
// nowhere) and routes the store clients' own loggers through it at DEBUG.
func setupLogging(level string) error {
	level = strings.ToLower(level)
	if level != "off" {
		l, ok := logLevels[level]
		if !ok {
			return exitWith(ExitUsage, fmt.Errorf("--log-level %q: want debug, info, warn, error or off", level))
		}
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
	}
	redis.SetLogger(redisLog{})
	return mysql.SetLogger(mysqlLog{})
}

// redisLog passes go-redis's messages to logger.
type redisLog struct{}

func (redisLog) Printf(ctx context.Context, format string, v ...any) {
	logger.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// mysqlLog passes the MySQL driver's messages to logger.
type mysqlLog struct{}

func (mysqlLog) Print(v ...any) { logger.Debug("mysql: " + strings.TrimSpace(fmt.Sprint(v...))) }
