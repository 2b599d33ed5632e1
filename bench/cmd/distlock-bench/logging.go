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

// logger is the command's logger, set from --log-level before the command
// runs. The store clients' process-wide loggers (go-redis, the MySQL
// driver) go through it too, at DEBUG, so that a peer's client does not
// write to stderr between the progress lines.
var logger = slog.New(slog.DiscardHandler)

var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// addLogFlag adds --log-level to root and sets the loggers up before it runs.
func addLogFlag(root *cobra.Command) {
	level := root.PersistentFlags().String("log-level", "warn", "log to stderr at this level and above: debug, info, warn, error or off")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		level := strings.ToLower(*level)
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
}

type redisLog struct{}

func (redisLog) Printf(ctx context.Context, format string, v ...any) {
	logger.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

type mysqlLog struct{}

func (mysqlLog) Print(v ...any) { logger.Debug("mysql: " + strings.TrimSpace(fmt.Sprint(v...))) }
