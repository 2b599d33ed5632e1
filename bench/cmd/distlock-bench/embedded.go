package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/distlock/distlock/backend"
	"github.com/distlock/distlock/bench/internal/compare"
)

// addEmbedded adds the in-process servers of --embedded: an etcd server
// (go.etcd.io/etcd/server/v3/embed) on free loopback ports in a temporary
// folder, when the etcd backend is built in.
func addEmbedded(ctx context.Context, s *targetSet) error {
	if _, err := backend.Lookup("etcd"); err != nil {
		return nil
	}
	addr, stop, err := startEmbeddedEtcd(ctx)
	if err != nil {
		return fmt.Errorf("--embedded: %w", err)
	}
	s.closers = append(s.closers, stop)
	s.targets = append(s.targets, compare.Target{Name: "etcd-embedded", URL: "etcd://" + addr + "/distlock-bench"})
	return nil
}

func startEmbeddedEtcd(ctx context.Context) (string, func() error, error) {
	dir, err := os.MkdirTemp("", "distlock-embedded-etcd")
	if err != nil {
		return "", nil, err
	}
	client, peer, err := freeLoopbackURLs()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.Name = "distlock-bench"
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// The embedded server's own log (zap, on stderr) is the command's
	// business only when asked for; its shutdown errors are noise.
	cfg.LogLevel = "fatal"
	if logger.Enabled(ctx, slog.LevelDebug) {
		cfg.LogLevel = "info"
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop := func() error {
		e.Close()
		return os.RemoveAll(dir)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		_ = stop()
		return "", nil, err
	case <-time.After(time.Minute):
		_ = stop()
		return "", nil, fmt.Errorf("embedded etcd not ready after a minute")
	case <-ctx.Done():
		_ = stop()
		return "", nil, ctx.Err()
	}
	return client.Host, stop, nil
}

// freeLoopbackURLs returns two URLs on free 127.0.0.1 ports.
func freeLoopbackURLs() (url.URL, url.URL, error) {
	var out [2]url.URL
	for i := range out {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return url.URL{}, url.URL{}, err
		}
		out[i] = url.URL{Scheme: "http", Host: ln.Addr().String()}
		ln.Close()
	}
	return out[0], out[1], nil
}
