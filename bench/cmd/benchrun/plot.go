package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Colours: mcpcluster blue (light blue with Redis 0.5 ms away), peers
// orange and green, the ceiling grey.
var (
	colourOurs    = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colourFar     = color.RGBA{R: 0x9e, G: 0xc9, B: 0xe8, A: 0xff}
	colourGoSDK   = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colourMCPGo   = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colourCeiling = color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
	colourP99     = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)

func colourOf(t *target) color.Color {
	switch t.Key {
	case "gosdk":
		return colourGoSDK
	case "mcpgo":
		return colourMCPGo
	case "ceiling":
		return colourCeiling
	}
	if t.Far {
		return colourFar
	}
	return colourOurs
}

// writePlots draws one PNG per main scenario into dir and returns the
// page's reference to each (rel is dir relative to the page).
func writePlots(res *suiteResult, dir, rel string) (map[string]string, error) {
	out := map[string]string{}
	for _, sc := range mainScenarios {
		var rs []row
		var labels []string
		for _, rev := range []string{legacy, modern} {
			for _, r := range rows(res, sc.name, rev, "main") {
				if !r.ok() {
					continue
				}
				rs = append(rs, r)
				short := "legacy"
				if rev == modern {
					short = "stateless"
				}
				labels = append(labels, fmt.Sprintf("%s · %s", r.label(), short))
			}
		}
		if len(rs) == 0 {
			continue
		}
		name := sc.name + ".png"
		if err := drawScenario(filepath.Join(dir, name), sc, rs, labels); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[sc.name] = filepath.ToSlash(filepath.Join(rel, name))
	}
	return out, nil
}

// drawScenario draws throughput (left) and p50/p99 latency (right) as
// horizontal bars, one row per configuration, top to bottom in table
// order.
func drawScenario(path string, sc scenarioInfo, rs []row, labels []string) error {
	n := len(rs)
	// Nominal axes count from the bottom: reverse so the first row is on top.
	rev := func(i int) int { return n - 1 - i }
	ylabels := make([]string, n)
	for i, l := range labels {
		ylabels[rev(i)] = l
	}

	left := plot.New()
	left.Title.Text = sc.name + ": throughput"
	left.X.Label.Text = "operations per second (higher is better)"
	if sc.name == "fanout" {
		left.X.Label.Text = "operations per second (one at a time)"
	}
	left.X.Min = 0
	barWidth := vg.Points(14)
	var maxRate float64
	for i, r := range rs {
		vals := make(plotter.Values, n)
		vals[rev(i)] = r.rep.Throughput
		maxRate = max(maxRate, r.rep.Throughput)
		bars, err := plotter.NewBarChart(vals, barWidth)
		if err != nil {
			return err
		}
		bars.Horizontal = true
		bars.Color = colourOf(r.t)
		bars.LineStyle.Width = 0
		left.Add(bars)
	}
	left.X.Max = maxRate * 1.25
	xys := make(plotter.XYs, n)
	txt := make([]string, n)
	for i, r := range rs {
		xys[rev(i)] = plotter.XY{X: r.rep.Throughput, Y: float64(rev(i))}
		txt[rev(i)] = " " + rate(r.rep.Throughput)
	}
	if lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: txt}); err == nil {
		for i := range lbl.TextStyle {
			lbl.TextStyle[i].YAlign = draw.YCenter
		}
		left.Add(lbl)
	}
	left.NominalY(ylabels...)

	right := plot.New()
	right.Title.Text = sc.name + ": latency (" + sc.latencyName + ")"
	right.X.Label.Text = "milliseconds, p50 (colour) and p99 (red); lower is better"
	right.X.Min = 0
	half := vg.Points(7)
	var maxLat float64
	p99 := make(plotter.Values, n)
	for i, r := range rs {
		vals := make(plotter.Values, n)
		vals[rev(i)] = r.rep.Latency.P50
		p99[rev(i)] = r.rep.Latency.P99
		maxLat = max(maxLat, r.rep.Latency.P99)
		bars, err := plotter.NewBarChart(vals, half)
		if err != nil {
			return err
		}
		bars.Horizontal = true
		bars.Color = colourOf(r.t)
		bars.LineStyle.Width = 0
		bars.Offset = half / 2
		right.Add(bars)
	}
	tail, err := plotter.NewBarChart(p99, half)
	if err != nil {
		return err
	}
	tail.Horizontal = true
	tail.Color = colourP99
	tail.LineStyle.Width = 0
	tail.Offset = -half / 2
	right.Add(tail)
	right.X.Max = maxLat * 1.1
	// The rows are the left panel's: no labels, more room for the bars.
	right.NominalY(make([]string, n)...)

	width := 34 * vg.Centimeter
	height := vg.Length(3+0.9*float64(n)) * vg.Centimeter
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 5}
	canvases := plot.Align([][]*plot.Plot{{left, right}}, tiles, dc)
	left.Draw(canvases[0][0])
	right.Draw(canvases[0][1])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
