// Package render turns the engine's results (package compare) into a
// report: a table for a terminal, report.json, results.csv, one SVG chart
// per workload with the hand-off panels, and report.html, which embeds
// them with the verdict (distlock ÷ each peer) at the top. It runs no
// workload; the engine draws nothing.
package render
