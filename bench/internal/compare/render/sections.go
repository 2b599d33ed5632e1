package render

import (
	"fmt"
	"github.com/distlock/distlock/bench/internal/compare"
	"html/template"
	"slices"
	"strconv"
	"strings"
)

// column is one metric column of a workload's HTML table.
type column struct {
	Metric string // the metric, or "floors" for the computed p50 ÷ floor
	Head   string
}

// explain is a term of a table, explained under it.
type explain struct{ Term, Text string }

// workloadText is what the report says of a workload: what it measures,
// which way is better, and what its columns mean.
type workloadText struct {
	Title   string
	What    string // HTML with the run's sizes as {pairs}, {workers}, {duration}, {ttl}
	Columns []column
	Explain []explain
}

var texts = map[string]workloadText{
	"uncontended": {
		Title: "Uncontended: one client, one free key",
		What: "One client takes a free key and releases it, pair after pair ({pairs} pairs a round, after one warm-up pair). " +
			"<b>Lower is better.</b> The floor is one bare round trip to the store: no lock can take less, " +
			"and “× floor” says how many round trips' worth a pair costs.",
		Columns: []column{{"p50", "p50"}, {"p99", "p99"}, {"floors", "p50 × floor"}, {"pairs/s", "pairs/s"},
			{"round trips/pair", "round trips / pair"}, {"requests/pair", "requests / pair"}, {"fsyncs/pair", "fsyncs / pair"}},
		Explain: []explain{
			{"round trips / pair", "counted on the wire of the clients the comparison made (peers, floors, distlock made by New; not a distlock opened from a URL): " +
				"a write after a read starts one. Exact for request-reply protocols; for etcd's gRPC, flow-control frames and pushed watch events count too."},
			{"requests / pair", "what the server counted during the pairs, divided by the pairs (its requests include the background: " +
				"pings and renewals): Redis commands, those a Lua script runs included; MariaDB statements and preparations (each statement of a batch counts, so this can exceed the round trips); " +
				"ZooKeeper packets; etcd gRPC messages (stream messages too)."},
			{"fsyncs / pair", "the server's flushes to disk per pair: InnoDB's data fsyncs, ZooKeeper's transaction log, etcd's WAL; " +
				"Redis: 0 without an append-only file."},
		},
	},
	"contended": {
		Title: "Contended: many clients, one key",
		What: "{workers} clients, each with connections of its own as separate processes would have, take one key in turn " +
			"for {duration} a round, holding it for no time. Acquisitions per second of all clients together: <b>higher is better</b>. " +
			"The floor is one client sending bare round trips back to back: what a lock needing one round trip per grant could reach.",
		Columns: []column{{"acq/s", "acq/s"}, {"handoff p50", "hand-off p50"}, {"handoff p99", "hand-off p99"},
			{"wait p99", "wait p99"}, {"max share", "max share"}, {"violations", "violations"}},
		Explain: []explain{
			{"hand-off", "from the start of a release to the next client's grant (lower is better; the panels below show every percentile)."},
			{"wait", "from asking for the lock to getting it, every client's waits pooled (p50 and max are in report.json and on stdout)."},
			{"max share", "the busiest client's grants divided by a fair share: 1.00× means every client got as many, {workers}× that one client got them all."},
			{"violations", "grants made while another client held the lock, added over the rounds: anything but 0 is a broken lock (for distlock, the command fails)."},
		},
	},
	"many-keys": {
		Title: "Many keys: a key per client",
		What: "{workers} clients, each on a key of its own, all at once for {duration} a round: the sum of their acquisitions per second. " +
			"<b>Higher is better.</b> The floor is as many clients sending bare round trips at once.",
		Columns: []column{{"acq/s", "acq/s"}},
	},
	"semaphore": {
		Title: "Semaphore: many clients, {permits} permits",
		What: "{semworkers} clients, each with connections of its own, share one semaphore of {permits} permits for {duration} a round: " +
			"each takes one permit, holds it for {semhold} and releases it, again and again. Acquisitions per second of all clients together: " +
			"<b>higher is better</b>. Only distlock runs it (the peer libraries have no semaphore); a backend without a native semaphore " +
			"is listed as unsupported (distlock refuses to imitate one with locks).",
		Columns: []column{{"acq/s", "acq/s"}, {"wait p50", "wait p50"}, {"wait p99", "wait p99"}, {"max holders", "max holders"}, {"violations", "violations"}},
		Explain: []explain{
			{"max holders", "the most permits the clients saw held at once (a safety check: never above {permits})."},
			{"violations", "grants made while {permits} permits were already held, added over the rounds: anything but 0 is a broken semaphore (the command fails)."},
		},
	},
	"rw": {
		Title: "Read-write lock: many clients, {rwreads}% reads",
		What: "{rwworkers} clients, each with connections of its own, share one read-write lock for {duration} a round: " +
			"each takes the read side ({rwreads}% of the time) or the write side, holds it for {rwhold} and releases it, again and again. " +
			"Acquisitions per second of all clients together, reads and writes: <b>higher is better</b>; a waiting writer keeps new readers out, " +
			"so the write waits say what writers pay under a stream of readers. Only distlock runs it (the peer libraries have no read-write lock); " +
			"a backend without native read-write locks is listed as unsupported (distlock refuses to imitate them with locks).",
		Columns: []column{{"acq/s", "acq/s"}, {"read acq/s", "read acq/s"}, {"write acq/s", "write acq/s"},
			{"write wait p99", "write wait p99"}, {"violations", "violations"}},
		Explain: []explain{
			{"write wait", "from asking for the write side to getting it, every client's write waits pooled. " +
				"The read wait p99, write wait p50 and the most readers seen holding at once are in report.json and on stdout."},
			{"violations", "grants that found a writer holding, and writers' grants that found anyone holding, added over the rounds: anything but 0 is a broken read-write lock (the command fails)."},
		},
	},
	"crash-recovery": {
		Title: "Crash recovery: the holder dies",
		What: "A holder is killed while it holds the lock (distlock: a holder process of its own, SIGKILL; " +
			"a peer: its client's connections cut, with no release, as a killed process's are; mem: its driver killed in process). " +
			"The time until a waiter holds the lock: <b>lower is better</b>. The dashed line is the lease TTL ({ttl}).",
		Columns: []column{{"recovery", "recovery"}, {"recovery/ttl", "recovery / TTL"}},
		Explain: []explain{
			{"recovery / TTL", "about 1: the store cannot see a holder die and waits for its lease to run out; far below 1: " +
				"the store freed the lock as soon as the holder's connection closed (MySQL: locks live as long as their connection)."},
		},
	},
}

// section is one workload in the HTML report.
type section struct {
	Name    string
	Title   string
	What    template.HTML
	Columns []column
	Explain []explain
	Groups  []tableGroup
	Chart   *chart
	Rounds  int
}

// tableGroup is one store's rows.
type tableGroup struct {
	Store string
	Span  int // the table's columns
	Rows  []tableRow
}

type tableRow struct {
	Library     string
	Kind        string // "distlock", "peer" or "floor"
	Cells       []tableCell
	Error       string
	Unsupported string
}

type tableCell struct {
	Text  string
	Range string // "min–max" of the rounds, for the headline column
}

func (rep *Report) sections(charts []chart) []section {
	var out []section
	for _, wl := range rep.workloads() {
		t := texts[wl]
		s := section{Name: wl, Title: rep.sprintf(t.Title), Columns: t.Columns, Rounds: rep.Config.Rounds,
			What: template.HTML(rep.sprintf(t.What))} // our own text
		if s.Title == "" {
			s.Title = wl
		}
		for _, e := range t.Explain {
			s.Explain = append(s.Explain, explain{Term: e.Term, Text: rep.sprintf(e.Text)})
		}
		for i := range charts {
			if charts[i].Workload == wl {
				s.Chart = &charts[i]
			}
		}
		s.Groups = rep.tableGroups(wl, t.Columns)
		out = append(out, s)
	}
	return out
}

// sprintf fills a workload text's {pairs}, {workers}, {duration} and
// {ttl} with the run's.
func (rep *Report) sprintf(text string) string {
	c := rep.Config
	return strings.NewReplacer("{pairs}", strconv.Itoa(c.Iterations), "{workers}", strconv.Itoa(c.Workers),
		"{duration}", c.Duration, "{ttl}", c.TTL, "{permits}", strconv.Itoa(c.Permits),
		"{semworkers}", strconv.Itoa(c.SemaphoreWorkers), "{semhold}", c.SemaphoreHold,
		"{rwworkers}", strconv.Itoa(c.RWWorkers), "{rwreads}", strconv.Itoa(c.RWReads), "{rwhold}", c.RWHold).Replace(text)
}

func (rep *Report) tableGroups(wl string, cols []column) []tableGroup {
	var out []tableGroup
	headline := charts[wl].metric
	for _, r := range rep.byWorkload(wl) {
		if len(out) == 0 || out[len(out)-1].Store != r.StoreName() {
			out = append(out, tableGroup{Store: r.StoreName(), Span: len(cols) + 1})
		}
		tr := tableRow{Library: legendLabel(r), Kind: [...]string{"distlock", "peer", "floor"}[rank(r)], Error: r.Error, Unsupported: r.Unsupported}
		for _, c := range cols {
			tr.Cells = append(tr.Cells, rep.cell(r, c, c.Metric == headline))
		}
		g := &out[len(out)-1]
		g.Rows = append(g.Rows, tr)
	}
	return out
}

func (rep *Report) cell(r compare.Result, c column, headline bool) tableCell {
	if c.Metric == "floors" {
		return rep.floorsCell(r)
	}
	m, ok := r.Lookup(c.Metric)
	if !ok {
		return tableCell{Text: "–"}
	}
	format := cellFormat(m.Unit)
	cell := tableCell{Text: format(m.Value)}
	if headline && len(m.Rounds) > 1 && m.Min < m.Max {
		cell.Range = format(m.Min) + "–" + format(m.Max)
	}
	return cell
}

// floorsCell is the uncontended p50 over the store's floor p50.
func (rep *Report) floorsCell(r compare.Result) tableCell {
	p50, ok := r.Metric("p50")
	if !ok || r.Floor {
		return tableCell{Text: "–"}
	}
	i := slices.IndexFunc(rep.Results, func(f compare.Result) bool {
		return f.Floor && f.Workload == r.Workload && f.StoreName() == r.StoreName()
	})
	if i < 0 {
		return tableCell{Text: "–"}
	}
	floor, _ := rep.Results[i].Metric("p50")
	if floor <= 0 {
		return tableCell{Text: "–"}
	}
	return tableCell{Text: sig3(p50/floor) + "×"}
}

// cellFormat returns how a table shows values of unit.
func cellFormat(unit string) func(float64) string {
	switch unit {
	case "x fair", "x":
		return func(v float64) string {
			if v > 0 && v < 0.095 {
				return fmt.Sprintf("%.1g×", v) // MySQL's crash recovery: 0.003×, not 0.00×
			}
			return fmt.Sprintf("%.2f×", v)
		}
	case "":
		return formatValue
	}
	return formatterFor(unit)
}
