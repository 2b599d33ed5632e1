package render

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"os"
	"slices"

	"codeberg.org/go-fonts/liberation/liberationsansregular"
)

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"svg": func(b []byte) template.HTML { return template.HTML(b) }, // our own rendered SVG
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>distlock: lock libraries side by side</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em 2em;color:#222;max-width:1500px}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.25em;margin:1.6em 0 .3em;border-top:1px solid #ddd;padding-top:.8em}
p{max-width:70em;margin:.4em 0}code{font-size:.92em;background:#f3f3f3;padding:0 .25em}
table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #e3e3e3;padding:.2em .45em;text-align:right;vertical-align:top}
th{background:#f4f4f4;font-weight:600;vertical-align:bottom}td.l,th.l{text-align:left}
tr.group td{font-weight:600;text-align:left;background:#eef2f7;border-top:1px solid #bbb;padding-top:.3em}
td.lib{padding-left:1.2em}
tr.distlock td.lib{font-weight:600;color:#1f5fae}tr.floor td{color:#777;font-style:italic}
td.num{font-variant-numeric:tabular-nums;white-space:nowrap}td.head{font-weight:600}
.range{display:block;color:#888;font-size:11px;font-weight:normal}.err{color:#a00;text-align:left;font-size:12px}.unsup{color:#777;text-align:left;font-size:12px;font-style:italic}
.pair{display:flex;gap:28px;align-items:flex-start;flex-wrap:wrap;margin:.6em 0}
figure{margin:0}.pair figure{flex:1 1 480px;min-width:0;max-width:700px}figure svg{max-width:100%;height:auto;display:block}figcaption{color:#666;font-size:12px}
dl.terms{margin:.6em 0;font-size:13px;max-width:60em}dl.terms dt{font-weight:600;float:left;clear:left;margin-right:.4em}dl.terms dd{margin:0 0 .2em}
.meta td,.meta th{text-align:left}.meta{margin:.4em 0 1em}.small{font-size:12px;color:#555}
nav a{margin-right:1em}
td.better,span.better{background:#dff3e0;color:#1b5e20}td.worse,span.worse{background:#fbe3e3;color:#8e1b1b}td.even{color:#666}
table.verdict td.num{font-weight:600}table.verdict{margin:.4em 0 .8em}span.better,span.worse{padding:0 .25em}
@font-face{font-family:"Liberation Sans";src:url(data:font/ttf;base64,{{.Font}}) format("truetype")}
</style></head><body>
<h1>distlock: lock libraries side by side</h1>
{{with .Ratios}}<h2 id="verdict">Verdict: distlock ÷ its fenced floor and ÷ each peer, same run</h2>
<p>Each of distlock's figures divided by the same figure of another lock library on the same store, in this run
(the median of the rounds' ratios). <span class="better">Green: distlock is better</span> by more than {{$.Even}}%
(faster, more acquisitions per second, fairer), <span class="worse">red: worse</span> by more than {{$.Even}}%, grey: within {{$.Even}}%,
about the noise of one run. Below each peer, its Go module and version as this report was built with them.</p>
<table class="verdict"><thead><tr><th class="l">store</th><th class="l">peer</th>{{range $.RatioHeads}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .}}<tr><td class="l">{{.Store}}</td><td class="l">{{.Peer}}{{if .Version}}<span class="range">{{.Version}}</span>{{end}}</td>{{range .Cells}}<td class="num {{.Verdict}}">{{.Text}}</td>{{end}}</tr>{{end}}
</tbody></table>{{end}}
<p>Every workload runs on every store with distlock, with the store's other lock libraries, and with a bare round trip of the store
(its <i>floor</i>), all measured by one harness (<code>bench/internal/measure</code>).
Each figure is the <b>median of {{.R.Config.Rounds}} rounds</b>; the small print under the charted figure and the chart's whisker give the
smallest and largest round. Each round runs the targets in a rotated order, so that load from other processes hits them alike.
Figures move by up to 3× between runs on a noisy machine: compare within one run.</p>
<nav>{{if .Ratios}}<a href="#verdict">Verdict</a>{{end}}{{range .Sections}}<a href="#{{.Name}}">{{.Title}}</a>{{end}}<a href="#setup">Setup</a></nav>
{{range .Sections}}
<h2 id="{{.Name}}">{{.Title}}</h2>
<p>{{.What}}</p>
<div class="pair">
<table>
<thead><tr><th class="l">library</th>{{range .Columns}}<th>{{.Head}}</th>{{end}}</tr></thead>
{{range .Groups}}<tbody><tr class="group"><td class="store" colspan="{{.Span}}">{{.Store}}</td></tr>
{{range .Rows}}<tr class="{{.Kind}}"><td class="l lib">{{.Library}}</td>
{{range .Cells}}<td class="num{{if .Range}} head{{end}}">{{.Text}}{{if .Range}}<span class="range">{{.Range}}</span>{{end}}</td>{{end}}</tr>
{{if .Error}}<tr class="{{.Kind}}"><td></td><td class="err" colspan="{{len .Cells}}">{{.Error}}</td></tr>{{end}}
{{if .Unsupported}}<tr class="{{.Kind}}"><td></td><td class="unsup" colspan="{{len .Cells}}">unsupported: {{.Unsupported}}</td></tr>{{end}}
{{end}}</tbody>{{end}}
</table>
{{with .Chart}}<figure>{{svg .SVG}}<figcaption>{{.File}}</figcaption></figure>{{end}}
</div>
{{if .Explain}}<dl class="terms">{{range .Explain}}<dt>{{.Term}}:</dt><dd>{{.Text}}</dd>{{end}}</dl>{{end}}
{{if eq .Name "contended"}}{{with $.Handoff}}<figure>{{svg .SVG}}<figcaption>{{.File}}: hand-off latency by percentile, one panel per store,
all panels on the same latency axis; dashed: the store's bare round trips back to back (its floor).</figcaption></figure>{{end}}{{end}}
{{end}}
<h2 id="setup">Setup</h2>
<table class="meta"><tbody>
<tr><th>run</th><td>{{.R.Created.Format "2006-01-02 15:04 MST"}}</td></tr>
<tr><th>command</th><td><code>{{.R.Command}}</code></td></tr>
{{range .Machine}}<tr><th>{{.K}}</th><td>{{.V}}</td></tr>{{end}}
<tr><th>workloads</th><td>{{.R.Config.Rounds}} rounds; {{.R.Config.Iterations}} uncontended pairs; {{.R.Config.Workers}} clients for {{.R.Config.Duration}} in the contended and many-keys runs; lease TTL {{.R.Config.TTL}}{{if .R.Config.Permits}}; {{.R.Config.SemaphoreWorkers}} clients on a semaphore of {{.R.Config.Permits}} permits{{end}}{{if .R.Config.RWWorkers}}; {{.R.Config.RWWorkers}} clients on a read-write lock, {{.R.Config.RWReads}}% reads{{end}}</td></tr>
</tbody></table>
{{if .R.Stores}}<h3>Stores</h3>
<table class="meta"><thead><tr><th>store</th><th>server</th><th>settings</th><th>floor</th><th>URL</th></tr></thead><tbody>
{{range .R.Stores}}<tr><td>{{.Name}}</td><td>{{.Server}}</td><td>{{range $i, $s := .Settings}}{{if $i}}; {{end}}{{$s}}{{end}}</td><td>{{.Floor}}</td><td><code>{{.URL}}</code>{{if .Note}}<div class="small">{{.Note}}</div>{{end}}</td></tr>{{end}}
</tbody></table>{{end}}
<h3>Libraries</h3>
<table class="meta"><thead><tr><th>row</th><th>version</th><th>connections held per lease</th><th>how it is driven</th></tr></thead><tbody>
{{range .R.Backends}}<tr><td>{{.Name}}</td><td>{{.Version}}</td><td>{{.Conns}}</td><td>{{if .About}}{{.About}}{{else}}distlock Locker opened from <code>{{.URL}}</code>, a Locker per client{{end}}</td></tr>{{end}}
</tbody></table>
<p class="small">Files: report.json (every round's figures and the samples behind the charts), results.csv, and the SVG charts beside this page.
docs/cli.md, “How figures are computed”, defines every figure.</p>
</body></html>
`))

// machineOrder is the order the report lists machine facts in.
var machineOrder = []string{"cpu", "cpus", "memory", "os", "kernel", "go", "distlock", "commit", "host", "servers"}

type kv struct{ K, V string }

func (rep *Report) machineRows() []kv {
	var out []kv
	for _, k := range machineOrder {
		if v, ok := rep.Machine[k]; ok {
			out = append(out, kv{k, v})
		}
	}
	var rest []string
	for k := range rep.Machine {
		if !slices.Contains(machineOrder, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		out = append(out, kv{k, rep.Machine[k]})
	}
	return out
}

func (rep *Report) writeHTML(path string, charts []chart) error {
	data := map[string]any{"R": rep, "Sections": rep.sections(charts), "Machine": rep.machineRows(),
		"Ratios": rep.ratios(), "RatioHeads": ratioHeads(), "Even": fmt.Sprintf("%.0f", (evenBand-1)*100),
		"Font": template.CSS(base64.StdEncoding.EncodeToString(liberationsansregular.TTF))}
	for i := range charts {
		if charts[i].Workload == "handoff" {
			data["Handoff"] = &charts[i]
		}
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, data); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
