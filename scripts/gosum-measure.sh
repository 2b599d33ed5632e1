#!/bin/sh
# scripts/gosum-measure.sh [REPO]: what a user's go.sum gets from each
# driver. For each driver, a fresh module in a temporary directory whose
# main calls the driver's constructor, with
#   replace github.com/distlock/distlock => REPO   (default: this checkout)
# then `go mod tidy` (which records the go.sum lines of the tests of every
# imported package too, as in any user's module) and `wc -l go.sum`.
# Prints "driver lines modules-with-test-infrastructure".
set -eu
repo=$(cd "${1:-$(dirname "$0")/..}" && pwd)
tmp=$(mktemp -d)
[ -n "${GOSUM_KEEP:-}" ] && echo "keeping $tmp" >&2 || trap 'rm -rf "$tmp"' EXIT
main_redislock='package main

import (
	"github.com/distlock/distlock/redislock"
	"github.com/redis/go-redis/v9"
)

func main() { _, _ = redislock.New(redis.NewClient(&redis.Options{}), nil) }'
main_redlock='package main

import (
	"github.com/distlock/distlock/redlock"
	"github.com/redis/go-redis/v9"
)

func main() { _, _ = redlock.New([]redis.UniversalClient{redis.NewClient(&redis.Options{})}, nil) }'
main_memlock='package main

import "github.com/distlock/distlock/memlock"

func main() { _ = memlock.NewStore() }'
main_sqllock='package main

import (
	"context"

	"github.com/distlock/distlock/sqllock"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	pool, _ := pgxpool.New(context.Background(), "postgres://localhost/x")
	_, _ = sqllock.NewPool(context.Background(), pool, nil)
}'
main_zklock='package main

import (
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
)

func main() { _, _ = zklock.New((*zk.Conn)(nil), nil) }'
main_etcdlock='package main

import (
	"github.com/distlock/distlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() { _, _ = etcdlock.New((*clientv3.Client)(nil), nil) }'
for d in redislock redlock memlock sqllock zklock etcdlock; do
	dir=$tmp/$d
	mkdir -p "$dir"
	eval "printf '%s\n' \"\$main_$d\"" >"$dir/main.go"
	printf 'module example.com/user%s\n\ngo 1.26.0\n\nrequire github.com/distlock/distlock v0.0.0\n\nreplace github.com/distlock/distlock => %s\n' "$d" "$repo" >"$dir/go.mod"
	(cd "$dir" && GOWORK=off GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1) || { echo "$d: go mod tidy failed:" >&2; (cd "$dir" && GOWORK=off go mod tidy); exit 1; }
	lines=$(wc -l <"$dir/go.sum")
	infra=$(grep -Eo '^(github.com/testcontainers|github.com/moby|github.com/docker|github.com/shirou/gopsutil|github.com/sirupsen/logrus|github.com/anishathalye/porcupine)[^ ]*' "$dir/go.sum" | sort -u | tr '\n' ' ')
	n=$(printf "%s" "$infra" | wc -w)
	echo "$d $lines $n${infra:+ ($infra)}"
done
