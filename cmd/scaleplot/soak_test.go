package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPlotSoak(t *testing.T) {
	dir := t.TempDir()
	samples := "seconds,node1 RSS,node2 RSS,Redis keys\n" +
		"0,20,21,10\n10,30,31,500\n20,30,32,400\n30,31,30,520\n40,29,33,480\n"
	path := filepath.Join(dir, "samples.csv")
	if err := os.WriteFile(path, []byte(samples), 0o644); err != nil {
		t.Fatal(err)
	}
	written, err := plotSoak(path, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "soak-rss.svg"), filepath.Join(dir, "soak-redis-keys.svg")}
	if !slices.Equal(written, want) {
		t.Fatalf("wrote %v, want %v", written, want)
	}
	data, err := os.ReadFile(want[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "RSS (MiB)") || !strings.Contains(string(data), ">minutes<") {
		t.Error("the RSS chart does not label its axes in MiB against minutes")
	}
	ss := parseSVG(t, data)
	if got := names(ss); !slices.Equal(got, []string{"node1", "node2"}) {
		t.Fatalf("RSS series %v, want one per node", got)
	}
	for _, s := range ss {
		if len(s.markers) != 0 {
			t.Errorf("%s: %d markers on a time series, want a bare line", s.name, len(s.markers))
		}
		if len(s.line) != 5 {
			t.Fatalf("%s: %d points, want 5", s.name, len(s.line))
		}
		if !(s.line[0][0] < s.line[4][0]) {
			t.Errorf("%s: time runs right to left: %v", s.name, s.line)
		}
	}
	// node2 at 33 MiB (last sample) is drawn above node1 at 29 (SVG y
	// grows downwards).
	if !(ss[1].line[4][1] < ss[0].line[4][1]) {
		t.Errorf("node2's 33 MiB drawn at y %.1f, not above node1's 29 at %.1f", ss[1].line[4][1], ss[0].line[4][1])
	}
	keys, err := os.ReadFile(want[1])
	if err != nil {
		t.Fatal(err)
	}
	if got := names(parseSVG(t, keys)); !slices.Equal(got, []string{"Redis keys"}) {
		t.Errorf("Redis keys series %v", got)
	}
}

func TestPlotSoakRejectsBadSamples(t *testing.T) {
	for name, samples := range map[string]string{
		"no samples":   "seconds,node1 RSS\n",
		"no seconds":   "minutes,node1 RSS\n0,1\n",
		"ragged row":   "seconds,node1 RSS\n0,1,2\n",
		"not a number": "seconds,node1 RSS\n0,lots\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := soakCharts(strings.NewReader(samples)); err == nil {
				t.Errorf("%q read without an error", samples)
			}
		})
	}
}

func TestPlotGoBench(t *testing.T) {
	out := `goos: linux
BenchmarkRoundTripsPerStream/inflight=1/pipelines=-1-2   	    2000	    597135 ns/op	         3.001 roundtrips/stream
BenchmarkRoundTripsPerStream/inflight=1/pipelines=2-2    	    2000	    514933 ns/op	         3.001 roundtrips/stream
BenchmarkRoundTripsPerStream/inflight=16/pipelines=-1-2  	    2000	    302726 ns/op	         3.015 roundtrips/stream
BenchmarkRoundTripsPerStream/inflight=16/pipelines=2-2   	    2000	    234427 ns/op	         0.6115 roundtrips/stream
PASS
`
	c, err := benchChart(strings.NewReader(out), "roundtrips/stream")
	if err != nil {
		t.Fatal(err)
	}
	if c.XLabel != "inflight" || len(c.Series) != 2 || c.Series[0].Name != "pipelines=-1" || c.Series[1].Name != "pipelines=2" {
		t.Fatalf("chart %q over %q with series %+v", c.Title, c.XLabel, c.Series)
	}
	if p := c.Series[1].Points; len(p) != 2 || p[1].X != 16 || p[1].Y != 0.6115 {
		t.Fatalf("pipelines=2 points %+v, want (1, 3.001) and (16, 0.6115)", p)
	}
	if _, err := benchChart(strings.NewReader(out), "allocs/op"); err == nil {
		t.Error("a metric no line reports gave a chart")
	}
}
