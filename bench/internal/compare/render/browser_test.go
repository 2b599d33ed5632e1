package render

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/compare"
	"github.com/distlock/distlock/bench/internal/compare/fakes"
	"github.com/distlock/distlock/bench/internal/measure"
)

// TestReportInBrowser renders report.html in headless Chromium: the page
// loads, has every section, every chart is drawn at a readable size with
// every row and its value, nothing reads NaN, 1e+01 or a format error, and
// nothing overflows a 1400-pixel window. The report comes from a fast run
// over mem:// with a stand-in peer and floor, so every kind of row is
// drawn. DISTLOCK_BROWSER_OUT=DIR keeps the report and its screenshot.
func TestReportInBrowser(t *testing.T) {
	chromium := findChromium(t)
	dir := t.TempDir()
	if keep := os.Getenv("DISTLOCK_BROWSER_OUT"); keep != "" {
		dir = keep
	}
	rep := fastReport(t)
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	checkLayout(t, chromium, dir, rep)
	checkScreenshot(t, chromium, dir)
}

// findChromium returns Chromium's path, or skips the test.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("DISTLOCK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium on PATH (Debian: apt-get install chromium; scripts/install-servers.sh installs it): the report is not checked in a browser")
	return ""
}

// chrome runs headless Chromium on file and returns its stdout.
func chrome(t *testing.T, chromium string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--window-size=1400,3000",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0",
		"--virtual-time-budget=10000"} // the page's fonts loaded and its scripts run before the DOM is dumped
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	for line := range strings.SplitSeq(stderr.String(), "\n") {
		if strings.Contains(line, "Uncaught") || strings.Contains(line, "Failed to load resource") {
			t.Errorf("browser: %s", line)
		}
	}
	return out
}

// layoutScript records, once the page is laid out, each chart's size and
// texts, the section ids and any horizontal overflow, once its fonts
// are loaded.
const layoutScript = `<script>
document.fonts.ready.then(function () {
  var out = {svgs: [], sections: [], overflow: document.documentElement.scrollWidth - window.innerWidth};
  document.querySelectorAll('svg').forEach(function (s) {
    var r = s.getBoundingClientRect();
    out.svgs.push({w: r.width, h: r.height, paths: s.querySelectorAll('path').length,
      texts: Array.prototype.map.call(s.querySelectorAll('text'), function (x) { return x.textContent; }),
      rights: Array.prototype.map.call(s.querySelectorAll('text'), function (x) { return x.getBoundingClientRect().right; }),
      lefts: Array.prototype.map.call(s.querySelectorAll('text'), function (x) { return x.getBoundingClientRect().left; }),
      left: r.left, right: r.right});
  });
  document.querySelectorAll('h2[id]').forEach(function (h) { out.sections.push(h.id); });
  out.verdicts = Array.prototype.map.call(document.querySelectorAll('table.verdict td.num'), function (td) {
    return td.className + ' ' + getComputedStyle(td).backgroundColor; });
  var pre = document.createElement('pre');
  pre.id = 'layout-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>`

type layout struct {
	Overflow float64
	Sections []string
	SVGs     []struct {
		W, H          float64
		Paths         int
		Texts         []string
		Rights, Lefts []float64 // each text's, in page pixels
		Left, Right   float64   // the chart's
	}
	Verdicts []string // the verdict table's cell classes
}

func checkLayout(t *testing.T, chromium, dir string, rep *Report) {
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	check := filepath.Join(dir, "layout-check.html")
	probe := strings.Replace(string(page), "</body>", layoutScript+"</body>", 1)
	if err := os.WriteFile(check, []byte(probe), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(chrome(t, chromium, "--dump-dom", "file://"+check))
	m := regexp.MustCompile(`(?s)<pre id="layout-check">(.*?)</pre>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the page did not run its layout check; DOM:\n%.2000s", dom)
	}
	var l layout
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &l); err != nil {
		t.Fatal(err)
	}
	var want []string
	if len(rep.ratios()) > 0 {
		want = append(want, "verdict") // first: the verdict leads
	}
	want = append(want, compare.Workloads...)
	if want = append(want, "setup"); !slices.Equal(l.Sections, want) {
		t.Errorf("sections %v, want %v", l.Sections, want)
	}
	if l.Overflow > 0 {
		t.Errorf("the page is %v px wider than a 1400 px window", l.Overflow)
	}
	if len(l.SVGs) != len(compare.Workloads)+1 {
		t.Fatalf("%d charts, want one per workload and the hand-off panels", len(l.SVGs))
	}
	for i, s := range l.SVGs {
		if s.W < 350 || s.H < 150 || s.Paths < 10 || len(s.Texts) < 8 {
			t.Errorf("chart %d is %vx%v px with %d paths and %d texts", i, s.W, s.H, s.Paths, len(s.Texts))
		}
	}
	// In page order: the hand-off panels follow the contended chart.
	for i, wl := range []string{"uncontended", "contended", "handoff", "many-keys", "semaphore", "rw", "crash-recovery"} {
		texts := strings.Join(l.SVGs[i].Texts, "\n")
		if wl == "handoff" {
			if !strings.Contains(texts, ": hand-off (lower is better)") {
				t.Errorf("chart %d is not the hand-off panels", i)
			}
			continue
		}
		svg := l.SVGs[i]
		var rights []float64
		for j, text := range svg.Texts {
			if svg.Lefts[j] < svg.Left-1 || svg.Rights[j] > svg.Right+1 {
				t.Errorf("%s chart: %q runs out of the chart (%v–%v px, the chart %v–%v)", wl, text, svg.Lefts[j], svg.Rights[j], svg.Left, svg.Right)
			}
			for _, r := range rep.byWorkload(wl) {
				if text == rowLabel(r) {
					rights = append(rights, svg.Rights[j])
				}
			}
		}
		// The row labels are right-aligned where the bars start: drawn in
		// a font wider than the one the chart was laid out with, the longer
		// ones run under the bars ("postgres: pg_advisory_loc").
		if len(rights) > 1 && slices.Max(rights)-slices.Min(rights) > 1.5 {
			t.Errorf("%s chart: the row labels end at %v px, not aligned: the page draws them in another font than the chart measured", wl, rights)
		}
		for _, r := range rep.byWorkload(wl) {
			if !strings.Contains(texts, rowLabel(r)) {
				t.Errorf("%s chart has no row %q", wl, rowLabel(r))
			}
			m, _ := r.Lookup(charts[wl].metric)
			if v := formatterFor(m.Unit)(m.Value); !strings.Contains(texts, v) {
				t.Errorf("%s chart lacks %s's value label %q", wl, r.Backend, v)
			}
		}
	}
	if len(rep.ratios()) > 0 {
		var colored int
		for _, v := range l.Verdicts {
			if (strings.Contains(v, "better") || strings.Contains(v, "worse")) && !strings.Contains(v, "rgba(0, 0, 0, 0)") {
				colored++
			}
		}
		if colored == 0 {
			t.Errorf("the verdict has no cell coloured better or worse: %v", l.Verdicts)
		}
	}
	visible := regexp.MustCompile(`(?s)<script.*?</script>|<style.*?</style>|<[^>]*>`).ReplaceAllString(string(page), " ")
	for _, bad := range []string{"NaN", "%!", "e+0", "e-0", "Inf", "<no value>"} {
		if strings.Contains(visible, bad) {
			t.Errorf("the page shows %q", bad)
		}
	}
}

func checkScreenshot(t *testing.T, chromium, dir string) {
	shot := filepath.Join(dir, "report.png")
	chrome(t, chromium, "--screenshot="+shot, "file://"+filepath.Join(dir, "report.html"))
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	if b.Dx() != 1400 || b.Dy() != 3000 {
		t.Errorf("screenshot is %v", b)
	}
	inked := 0
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			if r, g, bl, _ := img.At(x, y).RGBA(); r+g+bl < 3*0xf000 {
				inked++
			}
		}
	}
	if total := (b.Dx() / 4) * (b.Dy() / 4); inked < total/50 {
		t.Errorf("the screenshot is almost blank: %d of %d sampled pixels inked", inked, total)
	}
}

// fastReport runs every workload twice, briefly, on two mem stores, with
// a stand-in peer library and floor on the first.
func fastReport(t *testing.T) *Report {
	t.Helper()
	peer := fakes.NewChanLock()
	targets := []compare.Target{
		memTarget("mem", "browser-a"),
		{Name: "mem: chan-lock", Store: "mem", Library: "chan-lock", About: "a channel as a lock", URL: "mem://browser-a",
			New: func(context.Context, time.Duration) (measure.Contender, error) { return peer, nil }, Crash: peer.Crash},
		{Name: "mem: no-op (floor)", Store: "mem", Library: "no-op", Floor: true, URL: "mem://browser-a",
			New: func(context.Context, time.Duration) (measure.Contender, error) { return fakes.Noop{}, nil }},
		memTarget("mem-b", "browser-b"),
	}
	c := compare.Config{Iterations: 30, Workers: 3, Duration: 150 * time.Millisecond, TTL: 300 * time.Millisecond, Rounds: 2}
	results := compare.Run(context.Background(), targets, c, nil)
	t.Cleanup(peer.Wait)
	for _, r := range results {
		if r.Error != "" {
			t.Errorf("%s/%s: %s", r.Backend, r.Workload, r.Error)
		}
	}
	meta := Meta{Machine: map[string]string{"cpus": "2", "go": "test"}, Command: "distlock-bench --embedded",
		Stores: []StoreInfo{{Name: "mem", URL: "mem://browser-a", Server: "in process", Floor: "no-op"}}}
	return NewReport(targets, c, results, meta)
}

func memTarget(name, store string) compare.Target {
	return compare.Target{Name: name, URL: "mem://" + store, Crash: fakes.MemCrash(store)}
}
