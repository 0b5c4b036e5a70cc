package main

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// svgSeries is what a test reads back from a chart: each series' name
// and its markers, in the order drawn.
type svgSeries struct {
	name    string
	markers []svgMarker
	// line is the polyline's points (x,y pairs), when there is one.
	line [][2]float64
}

type svgMarker struct {
	cx, cy float64
	hollow bool
	title  string
}

// parseSVG checks that data is well-formed XML with an <svg> root and
// returns its series (the <g class="series"> groups).
func parseSVG(t *testing.T, data []byte) []svgSeries {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(string(data)))
	var out []svgSeries
	var cur *svgSeries
	var inCircle *svgMarker
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
			}
			attr := func(name string) string {
				for _, a := range el.Attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return ""
			}
			switch el.Name.Local {
			case "g":
				if attr("class") == "series" {
					out = append(out, svgSeries{name: attr("data-series")})
					cur = &out[len(out)-1]
				}
			case "polyline":
				if cur == nil {
					t.Fatal("a line outside a series")
				}
				for _, pt := range strings.Fields(attr("points")) {
					x, y, _ := strings.Cut(pt, ",")
					px, err1 := strconv.ParseFloat(x, 64)
					py, err2 := strconv.ParseFloat(y, 64)
					if err1 != nil || err2 != nil {
						t.Fatalf("line point %q", pt)
					}
					cur.line = append(cur.line, [2]float64{px, py})
				}
			case "circle":
				if cur == nil {
					t.Fatal("a marker outside a series")
				}
				cx, err1 := strconv.ParseFloat(attr("cx"), 64)
				cy, err2 := strconv.ParseFloat(attr("cy"), 64)
				if err1 != nil || err2 != nil {
					t.Fatalf("marker at %q,%q", attr("cx"), attr("cy"))
				}
				cur.markers = append(cur.markers, svgMarker{cx: cx, cy: cy, hollow: attr("fill") == "#ffffff"})
				inCircle = &cur.markers[len(cur.markers)-1]
			}
		case xml.CharData:
			if inCircle != nil {
				inCircle.title += string(el)
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "circle":
				inCircle = nil
			case "g":
				cur = nil
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return out
}

func names(ss []svgSeries) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.name)
	}
	return out
}

func TestPlotSample(t *testing.T) {
	dir := t.TempDir()
	written, err := plotFile(filepath.Join("testdata", "sample.json"), dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range written {
		got = append(got, filepath.Base(w))
	}
	want := []string{"sample-throughput.svg", "sample-efficiency.svg", "sample-p99.svg", "sample-node-cpu.svg",
		"sample-redis-cpu.svg", "sample-redis-commands.svg", "sample-bus-messages.svg", "sample-primary-pubsub.svg",
		"sample-shards-throughput.svg", "sample-shards-redis-cpu.svg", "sample-shards-primary-pubsub.svg"}
	if !slices.Equal(got, want) {
		t.Fatalf("wrote %v, want %v", got, want)
	}
	read := func(name string) []svgSeries {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return parseSVG(t, data)
	}

	// Throughput: a series per scenario and Redis set-up; the failed
	// point (3 primaries, N = 8) is left out; the saturated points are
	// open markers.
	tp := read("sample-throughput.svg")
	wantSeries := []string{"echo@2025-11-25, one Redis", "churn@2025-11-25, one Redis", "churn@2025-11-25, 3 primaries"}
	if !slices.Equal(names(tp), wantSeries) {
		t.Fatalf("throughput series %v, want %v", names(tp), wantSeries)
	}
	for i, n := range []int{5, 5, 3} {
		if len(tp[i].markers) != n {
			t.Fatalf("%s: %d points, want %d", tp[i].name, len(tp[i].markers), n)
		}
	}
	var hollow []string
	for _, s := range tp {
		for _, m := range s.markers {
			if m.hollow {
				hollow = append(hollow, m.title)
			}
		}
	}
	if want := []string{"churn@2025-11-25, one Redis: 16, 245", "churn@2025-11-25, 3 primaries: 4, 410"}; !slices.Equal(hollow, want) {
		t.Fatalf("open markers %v, want %v", hollow, want)
	}
	// Markers left to right by N, higher throughput higher up (smaller
	// y); N = 1, 2, 4, 8, 16 evenly spaced on the log scale.
	echo := tp[0].markers
	for i := 1; i < len(echo); i++ {
		if echo[i].cx <= echo[i-1].cx || echo[i].cy >= echo[i-1].cy {
			t.Fatalf("echo markers not rising left to right: %+v", echo)
		}
	}
	if d1, d4 := echo[1].cx-echo[0].cx, echo[4].cx-echo[3].cx; d1 < d4-0.2 || d1 > d4+0.2 {
		t.Fatalf("N = 1..16 not evenly spaced on a log scale: steps %.1f and %.1f", d1, d4)
	}

	// Efficiency is T(N) / (N × T(1)) of the same series.
	eff := read("sample-efficiency.svg")
	if eff[0].markers[1].title != "echo@2025-11-25, one Redis: 2, 0.844" {
		t.Fatalf("efficiency of echo at N = 2: %q, want 706/(2×418) = 0.844", eff[0].markers[1].title)
	}
	if eff[2].markers[2].title != "churn@2025-11-25, 3 primaries: 4, 0.854" {
		t.Fatalf("efficiency of the Cluster series at N = 4: %q, want 410/(4×120) = 0.854", eff[2].markers[2].title)
	}

	// Redis CPU per operation: the Cluster points have none (null).
	if rc := read("sample-redis-cpu.svg"); !slices.Equal(names(rc), wantSeries[:2]) {
		t.Fatalf("redis-cpu series %v, want the standalone ones only", names(rc))
	}
	// Per-primary pub/sub: only the Cluster series, (publish + spublish
	// + bus received) per primary: 0.33·N/3 + 0.67·N/3 = N/3.
	pp := read("sample-primary-pubsub.svg")
	if !slices.Equal(names(pp), wantSeries[2:]) {
		t.Fatalf("primary-pubsub series %v, want the Cluster one", names(pp))
	}
	var titles []string
	for _, m := range pp[0].markers {
		titles = append(titles, m.title)
	}
	if want := []string{"churn@2025-11-25, 3 primaries: 1, 0.333", "churn@2025-11-25, 3 primaries: 2, 0.667", "churn@2025-11-25, 3 primaries: 4, 1.33"}; !slices.Equal(titles, want) {
		t.Fatalf("per-primary pub/sub %v, want %v", titles, want)
	}

	// Against the number of primaries, at the largest N that succeeded
	// (the failed N = 8 of the Cluster is not it): one standalone Redis
	// at x = 1.
	sh := read("sample-shards-throughput.svg")
	titles = nil
	for _, s := range sh {
		for _, m := range s.markers {
			titles = append(titles, m.title)
		}
	}
	if want := []string{"echo@2025-11-25: 1, 4027", "churn@2025-11-25: 1, 245", "churn@2025-11-25: 3, 410"}; !slices.Equal(titles, want) {
		t.Fatalf("throughput by primaries %v, want %v", titles, want)
	}
}

func TestReadDataRejectsEmpty(t *testing.T) {
	for _, in := range []string{`{"points": []}`, `{"points": [`, `not json`} {
		if _, err := readData(strings.NewReader(in)); err == nil {
			t.Errorf("readData(%q): no error", in)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		max  float64
		want []float64
	}{
		{4027, []float64{0, 1000, 2000, 3000, 4000, 5000}},
		{1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0.07, []float64{0, 0.02, 0.04, 0.06, 0.08}},
		{16.93, []float64{0, 5, 10, 15, 20}},
		{0, []float64{0, 1}},
	} {
		if got := niceTicks(c.max); !slices.Equal(got, c.want) {
			t.Errorf("niceTicks(%v) = %v, want %v", c.max, got, c.want)
		}
	}
}
