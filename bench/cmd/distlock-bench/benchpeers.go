package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/distlock/distlock/bench/internal/compare"
	"github.com/distlock/distlock/bench/internal/compare/render"
	"github.com/distlock/distlock/bench/internal/peers"
)

// addPeers adds, after each distlock target, its store's peer libraries
// (when withPeers) and its bare round trip, and describes each store.
func addPeers(ctx context.Context, s *targetSet, withPeers bool) {
	var out []compare.Target
	for _, t := range s.targets {
		t.Version = peers.ModuleVersion(libraryPath)
		out = append(out, t)
		info := render.StoreInfo{Name: t.StoreName(), URL: t.Display()}
		st, err := peers.For(t.URL)
		switch {
		case errors.Is(err, peers.ErrNoPeers) && t.Crash != nil:
			info.Server = "in process"
		case err != nil:
			info.Note = "no peers or floor: " + err.Error()
			fmt.Fprintf(os.Stderr, "distlock-bench: %s: %s\n", t.Name, info.Note)
		default:
			me := &out[len(out)-1]
			if d := st.Distlock; d.New != nil {
				me.New, me.About, me.RoundTrips = d.New, d.About, peers.RoundTrips
			}
			me.Counters, me.Conns = st.Counters, st.Conns
			out = append(out, storeTargets(t, st, withPeers)...)
			info.Floor = st.Floor.Name
			describeStore(ctx, st, &info)
		}
		s.stores = append(s.stores, info)
	}
	s.targets = out
}

// storeTargets returns the fenced floors, the peers (when withPeers) and
// the floor of t's store as targets.
func storeTargets(t compare.Target, st *peers.Store, withPeers bool) []compare.Target {
	store := t.StoreName()
	var out []compare.Target
	for _, p := range st.Fenced {
		out = append(out, compare.Target{Name: store + ": " + p.Name, Store: store, Library: p.Name, Fenced: true,
			URL: t.URL, About: p.About, New: p.New, Crash: p.Crash, Counters: st.Counters, RoundTrips: peers.RoundTrips})
	}
	if withPeers {
		for _, p := range st.Peers {
			out = append(out, compare.Target{Name: store + ": " + p.Name, Store: store, Library: p.Name,
				URL: t.URL, About: p.About, New: p.New, Crash: p.Crash, Counters: st.Counters, RoundTrips: peers.RoundTrips,
				Version: moduleLabel(p.Module), Conns: p.Conns})
		}
	}
	f := st.Floor
	return append(out, compare.Target{Name: store + ": floor (" + f.Name + ")", Store: store, Library: f.Name,
		Floor: true, URL: t.URL, About: "the floor: " + f.About, New: f.New, Counters: st.Counters, RoundTrips: peers.RoundTrips})
}

func describeStore(ctx context.Context, st *peers.Store, info *render.StoreInfo) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	si, err := st.Info(ctx)
	info.Server, info.Settings = si.Version, si.Settings
	if err != nil {
		info.Note = "server information: " + err.Error()
	}
}

// moduleLabel names a peer's module and its version as this binary was
// built with them, without the host: "go-sql-driver/mysql v1.10.1" (the
// module is the library's, or its client's for a SQL function such as
// GET_LOCK); "" when the build info does not say.
func moduleLabel(module string) string {
	v := peers.ModuleVersion(module)
	if v == "" {
		return ""
	}
	_, short, ok := strings.Cut(module, "/")
	if !ok {
		short = module
	}
	return short + " " + v
}
