package redisbench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/bench/internal/lockbench"
	dlredlock "github.com/distlock/distlock/redlock"
	"github.com/distlock/distlock/sandbox"
)

// BenchmarkRedlockPair splits the uncontended Redlock pair (3 nodes) as
// TestPairs times it: distlock's driver alone, its Locker (what TestPairs
// calls), and redsync, with the servers' script time per pair (srv-ns/op,
// all nodes). For profiles of the client:
//
//	cd bench && DISTLOCK_SANDBOX=local go test -run '^$' -bench RedlockPair -cpuprofile /tmp/cpu.out ./redis/
func BenchmarkRedlockPair(b *testing.B) {
	ctx := context.Background()
	addrs := sandbox.StartT(b, sandbox.Spec{Kind: sandbox.Redis, Nodes: 3, Stock: true}).Addrs()
	b.Run("driver", func(b *testing.B) {
		cs := clients(addrs, nil)
		defer closeAll(cs)
		d, err := dlredlock.New(universal(cs), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		key := lockbench.UniqueKey("redlock-layers")
		b.ReportAllocs()
		defer serverTime(b, addrs)()
		driverPairs(ctx, b, d, key)
	})
	for _, lib := range []pairLib{{name: "locker", make: dlRedlock}, {name: "redsync", make: redsyncLib}} {
		b.Run(lib.name, func(b *testing.B) {
			x := lib.make(addrs, nil)
			defer x.Close()
			key := lockbench.UniqueKey("redlock-layers")
			b.ReportAllocs()
			defer serverTime(b, addrs)()
			contenderPairs(ctx, b, x, key)
		})
	}
}

// serverTime reports, when the returned function is called, the servers'
// CPU per op (INFO cpu: srv-cpu-ns/op, all nodes, and srvN-cpu-ns/op,
// node N), their time in scripts (INFO commandstats usec of EVALSHA and
// EVAL, all nodes: srv-script-ns/op) and the client process's CPU per op
// (cli-cpu-ns/op).
func serverTime(b *testing.B, addrs []string) func() {
	read := func() (cpu []float64, script float64) {
		for _, a := range addrs {
			c := redis.NewClient(&redis.Options{Addr: a})
			raw, err := c.Info(context.Background(), "cpu", "commandstats").Result()
			_ = c.Close()
			if err != nil {
				b.Fatal(err)
			}
			var nodeCPU float64
			for line := range strings.SplitSeq(raw, "\n") {
				name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
				if !ok {
					continue
				}
				switch name {
				case "used_cpu_sys", "used_cpu_user":
					v, _ := strconv.ParseFloat(rest, 64)
					nodeCPU += v * 1e9
				case "cmdstat_evalsha", "cmdstat_eval":
					for f := range strings.SplitSeq(rest, ",") {
						if v, ok := strings.CutPrefix(f, "usec="); ok {
							n, _ := strconv.ParseFloat(v, 64)
							script += n * 1e3
						}
					}
				}
			}
			cpu = append(cpu, nodeCPU)
		}
		return cpu, script
	}
	rusage := func() float64 {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return float64(ru.Utime.Nano() + ru.Stime.Nano())
	}
	cpu0, script0 := read()
	cli0 := rusage()
	return func() {
		cli1 := rusage()
		cpu1, script1 := read()
		n := float64(b.N)
		var sum float64
		for i := range cpu1 {
			sum += cpu1[i] - cpu0[i]
			b.ReportMetric((cpu1[i]-cpu0[i])/n, fmt.Sprintf("srv%d-cpu-ns/op", i))
		}
		b.ReportMetric(sum/n, "srv-cpu-ns/op")
		b.ReportMetric((script1-script0)/n, "srv-script-ns/op")
		b.ReportMetric((cli1-cli0)/n, "cli-cpu-ns/op")
	}
}
