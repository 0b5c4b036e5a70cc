package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The soak's samples (make soak writes docs/soak/samples.csv): a
// "seconds" column, then one column per node and figure ("node2 RSS")
// and Redis's own ("Redis keys"). Each figure is a chart against
// minutes, one line per node.

// soakUnits are the figures' units (the CSV carries none).
var soakUnits = map[string]string{"RSS": "MiB", "heap in use": "MiB", "Redis memory": "MiB"}

var nodeColumn = regexp.MustCompile(`^(node\d+) (.+)$`)

// soakCharts reads the samples and returns one chart per figure, in the
// columns' order.
func soakCharts(r io.Reader) ([]string, map[string]*chart, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, nil, err
	}
	if len(rows) < 2 || len(rows[0]) < 2 || rows[0][0] != "seconds" {
		return nil, nil, errors.New(`want a "seconds" column and at least one sample`)
	}
	var order []string
	charts := map[string]*chart{}
	for col, name := range rows[0][1:] {
		figure, line := name, name
		if m := nodeColumn.FindStringSubmatch(name); m != nil {
			figure, line = m[2], m[1]
		}
		c, ok := charts[figure]
		if !ok {
			y := figure
			if u := soakUnits[figure]; u != "" {
				y += " (" + u + ")"
			}
			c = &chart{Title: "Soak: " + figure, XLabel: "minutes", YLabel: y, Lines: true}
			charts[figure] = c
			order = append(order, figure)
		}
		s := series{Name: line}
		for i, row := range rows[1:] {
			if len(row) != len(rows[0]) {
				return nil, nil, fmt.Errorf("sample %d: %d columns, want %d", i+1, len(row), len(rows[0]))
			}
			sec, err1 := strconv.ParseFloat(row[0], 64)
			v, err2 := strconv.ParseFloat(row[col+1], 64)
			if err := errors.Join(err1, err2); err != nil {
				return nil, nil, fmt.Errorf("sample %d: %w", i+1, err)
			}
			s.Points = append(s.Points, xy{X: sec / 60, Y: v})
		}
		c.Series = append(c.Series, s)
	}
	return order, charts, nil
}

// plotSoak writes DIR/soak-<figure>.svg for each figure of the samples
// at path, and returns the paths written.
func plotSoak(path, dir string) ([]string, error) {
	return drawFile(path, func(r io.Reader) ([]string, []*chart, error) {
		order, charts, err := soakCharts(r)
		var outs []string
		var cs []*chart
		for _, figure := range order {
			outs = append(outs, filepath.Join(dir, "soak-"+strings.ReplaceAll(strings.ToLower(figure), " ", "-")+".svg"))
			cs = append(cs, charts[figure])
		}
		return outs, cs, err
	})
}

// drawFile reads the data at path with read, which returns the charts
// and the path of each, writes them in order and returns the paths
// written.
func drawFile(path string, read func(io.Reader) ([]string, []*chart, error)) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	outs, charts, err := read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var written []string
	for i, c := range charts {
		if err := c.writeFile(outs[i]); err != nil {
			return written, err
		}
		written = append(written, outs[i])
	}
	return written, nil
}
