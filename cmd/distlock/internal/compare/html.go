package compare

import (
	"bytes"
	"html/template"
	"os"
)

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"fmt":  formatValue,
	"unit": unitLabel,
	"svg":  func(b []byte) template.HTML { return template.HTML(b) }, // our own rendered SVG
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>distlock: backends side by side</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th:first-child,td:first-child{text-align:left}.err{color:#a00;text-align:left}
figure{display:inline-block;margin:0 1em 1em 0}
</style></head><body>
<h1>distlock: backends side by side</h1>
<p>Run {{.R.Created.Format "2006-01-02 15:04 MST"}} on {{range $k, $v := .R.Machine}}{{$k}}: {{$v}}; {{end}}</p>
<p>Workloads: {{.R.Config.Iterations}} uncontended pairs; {{.R.Config.Workers}} clients for {{.R.Config.Duration}} in the contended and many-keys runs; TTL {{.R.Config.TTL}}.
Figures move by up to 3× between runs on a noisy machine: compare backends within one run.</p>
<h2>Backends</h2><table><tr><th>name</th><th>URL</th></tr>
{{range .R.Backends}}<tr><td>{{.Name}}</td><td>{{.URL}}</td></tr>{{end}}</table>
{{range .Sections}}<h2>{{.Name}}</h2>
<table><tr><th>backend</th>{{range .Header}}<th>{{.Name}} {{unit .Unit}}</th>{{end}}</tr>
{{range .Rows}}<tr><td>{{.Backend}}</td>{{if .Error}}<td class="err" colspan="9">{{.Error}}</td>{{else}}{{range .Metrics}}<td>{{fmt .Value}}</td>{{end}}{{end}}</tr>{{end}}
</table>{{end}}
<h2>Charts</h2>
{{range .Charts}}<figure>{{svg .SVG}}<figcaption>{{.Workload}} ({{.File}})</figcaption></figure>{{end}}
</body></html>
`))

type section struct {
	Name   string
	Header []Metric
	Rows   []Result
}

func (rep *Report) writeHTML(path string, charts []chart) error {
	var secs []section
	for _, wl := range rep.workloads() {
		rows := rep.byWorkload(wl)
		secs = append(secs, section{Name: wl, Header: firstMetrics(rows), Rows: rows})
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, map[string]any{"R": rep, "Sections": secs, "Charts": charts}); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
