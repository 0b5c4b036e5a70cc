package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Go benchmark output (go test -bench) drawn as one chart: a metric of
// sub-benchmarks named .../X=N/SERIES... against N, one line per
// series. E.g. BenchmarkRoundTripsPerStream/inflight=16/pipelines=2-2
// gives the point x=16 on the line "pipelines=2".

// benchLine is a result line: its name and its "value unit" pairs.
var benchLine = regexp.MustCompile(`^Benchmark\S*?/(\w+)=(\d+)/(\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// benchChart reads go test -bench output and returns the chart of metric.
func benchChart(r io.Reader, metric string) (*chart, error) {
	c := &chart{Title: metric, YLabel: metric, LogX: true}
	byName := map[string]int{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		x, _ := strconv.ParseFloat(m[2], 64)
		f := strings.Fields(m[5])
		for i := 0; i+1 < len(f); i += 2 {
			if f[i+1] != metric {
				continue
			}
			y, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m[0], err)
			}
			c.XLabel = m[1]
			i, ok := byName[m[3]]
			if !ok {
				i = len(c.Series)
				byName[m[3]] = i
				c.Series = append(c.Series, series{Name: m[3], Style: i})
			}
			c.Series[i].Points = append(c.Series[i].Points, xy{X: x, Y: y})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(c.Series) == 0 {
		return nil, errors.New("no sub-benchmark X=N/... reports " + metric)
	}
	slices.SortStableFunc(c.Series, func(a, b series) int { return strings.Compare(a.Name, b.Name) })
	return c, nil
}

// plotBench writes the chart of metric in the benchmark output at path
// to out.
func plotBench(path, metric, title, out string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := benchChart(f, metric)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if title != "" {
		c.Title = title
	}
	return c.writeFile(out)
}
