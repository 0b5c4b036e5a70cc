package main

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// A chart is a line chart of one or more series against a shared x
// axis, drawn as a self-contained SVG.
type chart struct {
	Title  string
	XLabel string
	YLabel string
	// LogX puts x on a base-2 log scale (node counts 1, 2, 4, 8, 16).
	LogX bool
	// Ref draws a dashed horizontal reference line at this y (efficiency
	// 1.0), when set.
	Ref    *float64
	Series []series
	// Note is a line under the plot (what hollow markers mean).
	Note string
	// Lines draws each series as a line without markers, with x ticks at
	// round values instead of at every measured x (a time series).
	Lines bool
}

type series struct {
	Name string
	// Style picks the dash pattern (one per Redis set-up).
	Style  int
	Points []xy
}

type xy struct {
	X, Y float64
	// Hollow marks a point whose figure is another host's limit
	// (saturated), drawn as an open marker.
	Hollow bool
}

const (
	width   = 760
	height  = 440
	marginL = 70
	marginR = 250 // the legend
	marginT = 40
	marginB = 60
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

var dashes = []string{"", "6,3", "2,3", "8,3,2,3"}

// render writes the chart as SVG.
func (c *chart) render(w io.Writer) error {
	var b strings.Builder
	xs := c.xValues()
	ymax := 0.0
	for _, s := range c.Series {
		for _, p := range s.Points {
			ymax = math.Max(ymax, p.Y)
		}
	}
	if c.Ref != nil {
		ymax = math.Max(ymax, *c.Ref)
	}
	yticks := niceTicks(ymax)
	ytop := yticks[len(yticks)-1]
	plotW, plotH := float64(width-marginL-marginR), float64(height-marginT-marginB)
	xpos := c.xScale(xs, plotW)
	ypos := func(y float64) float64 { return float64(marginT) + plotH - y/ytop*plotH }

	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<title>%s</title>`+"\n", esc(c.Title))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", marginL, esc(c.Title))

	// Grid and y ticks.
	for _, t := range yticks {
		y := ypos(t)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", marginL, y, float64(marginL)+plotW, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-6, y+4, formatTick(t))
	}
	// X ticks at the measured values, or at round ones.
	xticks := xs
	if c.Lines {
		xticks = niceTicks(xs[len(xs)-1])
	}
	for _, x := range xticks {
		px := xpos(x)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#e0e0e0"/>`+"\n", px, marginT, px, float64(marginT)+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px, float64(marginT)+plotH+16, formatTick(x))
	}
	// Axes and their labels.
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000000"/>`+"\n", marginL, float64(marginT)+plotH, float64(marginL)+plotW, float64(marginT)+plotH)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%.1f" stroke="#000000"/>`+"\n", marginL, marginT, marginL, float64(marginT)+plotH)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", float64(marginL)+plotW/2, float64(marginT)+plotH+36, esc(c.XLabel))
	fmt.Fprintf(&b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`+"\n", float64(marginT)+plotH/2, float64(marginT)+plotH/2, esc(c.YLabel))
	if c.Ref != nil {
		y := ypos(*c.Ref)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555555" stroke-dasharray="4,4"/>`+"\n", marginL, y, float64(marginL)+plotW, y)
	}
	if c.Note != "" {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#555555">%s</text>`+"\n", marginL, height-8, esc(c.Note))
	}

	// Series: a polyline and a marker per point, and a legend entry.
	for i, s := range c.Series {
		color := palette[i%len(palette)]
		dash := dashes[s.Style%len(dashes)]
		dashAttr := ""
		if dash != "" {
			dashAttr = fmt.Sprintf(` stroke-dasharray="%s"`, dash)
		}
		pts := slices.Clone(s.Points)
		slices.SortFunc(pts, func(a, b xy) int { return cmp.Compare(a.X, b.X) })
		fmt.Fprintf(&b, `<g class="series" data-series="%s">`+"\n", esc(s.Name))
		if len(pts) > 1 {
			var coords []string
			for _, p := range pts {
				coords = append(coords, fmt.Sprintf("%.1f,%.1f", xpos(p.X), ypos(p.Y)))
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(coords, " "), color, dashAttr)
		}
		for _, p := range pts {
			if c.Lines {
				break
			}
			fill := color
			if p.Hollow {
				fill = "#ffffff"
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s" stroke="%s" stroke-width="1.5"><title>%s: %s, %s</title></circle>`+"\n",
				xpos(p.X), ypos(p.Y), fill, color, esc(s.Name), formatTick(p.X), formatValue(p.Y))
		}
		b.WriteString("</g>\n")
		ly := float64(marginT + 8 + 18*i)
		lx := float64(width - marginR + 16)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+24, ly, color, dashAttr)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+30, ly+4, esc(s.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeFile writes the chart as an SVG file at path.
func (c *chart) writeFile(path string) error {
	var b strings.Builder
	if err := c.render(&b); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// xValues is every x of every series, sorted, once each.
func (c *chart) xValues() []float64 {
	var xs []float64
	for _, s := range c.Series {
		for _, p := range s.Points {
			xs = append(xs, p.X)
		}
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	if len(xs) == 0 {
		xs = []float64{1}
	}
	return xs
}

// xScale maps x to its position: from the smallest x to the largest,
// linear or log2, padded so that no marker sits on the frame.
func (c *chart) xScale(xs []float64, plotW float64) func(float64) float64 {
	f := func(x float64) float64 { return x }
	if c.LogX {
		f = func(x float64) float64 { return math.Log2(math.Max(x, 1)) }
	}
	lo, hi := f(xs[0]), f(xs[len(xs)-1])
	if hi <= lo {
		lo, hi = lo-1, hi+1
	}
	pad := 0.06 * (hi - lo)
	lo -= pad
	hi += pad
	return func(x float64) float64 { return float64(marginL) + (f(x)-lo)/(hi-lo)*plotW }
}

// niceTicks returns ticks from 0 to at least max, 4 to 8 of them, at 1,
// 2 or 5 times a power of ten.
func niceTicks(max float64) []float64 {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		return []float64{0, 1}
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	var step float64
	switch r := raw / mag; {
	case r <= 1:
		step = mag
	case r <= 2:
		step = 2 * mag
	case r <= 5:
		step = 5 * mag
	default:
		step = 10 * mag
	}
	var out []float64
	for i := 0; ; i++ {
		// Without the float noise of i × step (0.6000000000000001).
		t, _ := strconv.ParseFloat(strconv.FormatFloat(float64(i)*step, 'g', 12, 64), 64)
		out = append(out, t)
		if t >= max {
			return out
		}
	}
}

func formatTick(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func formatValue(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func esc(s string) string { return html.EscapeString(s) }
