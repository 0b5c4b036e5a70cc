// Command scaleplot draws the scale-out testbed's results as SVG line
// charts: for each data file that scripts/scaleout.sh --data wrote, the
// throughput, efficiency, p99 latency, node and Redis CPU per operation,
// Redis commands and bus messages per operation against the number of
// nodes, one line per scenario (and Redis set-up), and for Redis Cluster
// runs the pub/sub messages each primary handled per operation.
//
// Usage:
//
//	scaleplot [-out DIR] FILE.json...
//
// Each FILE.json gives DIR/FILE-<chart>.svg (FILE without directory and
// .json); the paths written are printed one a line. docs/SCALING.md
// shows the ones in docs/scaling.
//
//	scaleplot -soak docs/soak/samples.csv
//
// draws the soak's samples (make soak) instead: one chart per figure
// against minutes, one line per node, into the CSV's directory
// (soak-<figure>.svg), shown in docs/RELIABILITY.md.
//
//	scaleplot -storm docs/scaling/storm/storm.json
//
// draws a node's death at scale (make storm, cmd/chaos -storm) beside
// the file: the shares of the cut GET streams resumed and of the cut
// calls ended against seconds from the kill (storm-resumed.svg), and the
// CPU of Redis, the surviving nodes, the clients and the whole machine
// (storm-redis-cpu.svg).
//
//	scaleplot -gobench FILE.txt -metric roundtrips/stream -o OUT.svg
//
// draws one metric of go test -bench output whose sub-benchmarks are
// named .../X=N/SERIES: the metric against N, one line per SERIES.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// dataFile is what scripts/scaleout.sh --data writes.
type dataFile struct {
	Machine struct {
		CPUs int `json:"cpus"`
	} `json:"machine"`
	Shares struct {
		Node  float64 `json:"node"`
		Redis float64 `json:"redis"`
	} `json:"shares"`
	WorkersPerNode int     `json:"workers_per_node"`
	Duration       string  `json:"duration"`
	Points         []point `json:"points"`
}

// point is one scenario at one node count and Redis set-up. Figures the
// run could not take are null (nil).
type point struct {
	Shards             int       `json:"shards"`
	N                  int       `json:"n"`
	Scenario           string    `json:"scenario"`
	Revision           string    `json:"revision"`
	OK                 bool      `json:"ok"`
	OpsPerS            float64   `json:"ops_per_s"`
	P99                float64   `json:"p99_ms"`
	RedisCommandsPerOp *float64  `json:"redis_commands_per_op"`
	BusMessagesPerOp   *float64  `json:"bus_messages_per_op"`
	RedisMicrosPerOp   *float64  `json:"redis_us_per_op"`
	NodeMicrosPerOp    *float64  `json:"node_us_per_op"`
	Primaries          []primary `json:"primaries"`
	Limit              string    `json:"limit"`
}

// primary is a Redis Cluster primary's part of a point.
type primary struct {
	Publish     *float64 `json:"publish_per_op"`
	SPublish    *float64 `json:"spublish_per_op"`
	BusReceived *float64 `json:"bus_publish_received_per_op"`
}

// metric is one chart: a figure of a point (false: none), drawn against
// N for every series.
type metric struct {
	name, title, ylabel string
	ref                 *float64
	// byShards: also drawn against the number of Redis primaries.
	byShards bool
	value    func(p point, base map[string]float64) (float64, bool)
}

func ptr(v *float64) (float64, bool) {
	if v == nil {
		return 0, false
	}
	return *v, true
}

var one = 1.0

var metrics = []metric{
	{name: "throughput", title: "Throughput", ylabel: "operations per second", byShards: true,
		value: func(p point, _ map[string]float64) (float64, bool) { return p.OpsPerS, true }},
	{name: "efficiency", title: "Efficiency T(N) / (N × T(1))", ylabel: "efficiency", ref: &one,
		value: func(p point, base map[string]float64) (float64, bool) {
			t1, ok := base[seriesKey(p)]
			if !ok || t1 <= 0 {
				return 0, false
			}
			return p.OpsPerS / (float64(p.N) * t1), true
		}},
	{name: "p99", title: "p99 latency", ylabel: "ms",
		value: func(p point, _ map[string]float64) (float64, bool) { return p.P99, true }},
	{name: "node-cpu", title: "Nodes' CPU per operation", ylabel: "µs per operation (all nodes)",
		value: func(p point, _ map[string]float64) (float64, bool) { return ptr(p.NodeMicrosPerOp) }},
	{name: "redis-cpu", title: "Redis CPU per operation", ylabel: "µs per operation (all primaries)", byShards: true,
		value: func(p point, _ map[string]float64) (float64, bool) { return ptr(p.RedisMicrosPerOp) }},
	{name: "redis-commands", title: "Redis commands per operation", ylabel: "commands per operation",
		value: func(p point, _ map[string]float64) (float64, bool) { return ptr(p.RedisCommandsPerOp) }},
	{name: "bus-messages", title: "Bus messages (PUBLISH, SPUBLISH) per operation", ylabel: "messages per operation",
		value: func(p point, _ map[string]float64) (float64, bool) { return ptr(p.BusMessagesPerOp) }},
	{name: "primary-pubsub", title: "Pub/sub messages each primary handled per operation", ylabel: "messages per operation, mean per primary", byShards: true,
		value: func(p point, _ map[string]float64) (float64, bool) { return primaryPubSub(p) }},
}

// primaryPubSub is the mean over a Cluster point's primaries of the
// PUBLISH and SPUBLISH they were sent and the publish messages they got
// over the cluster bus, per operation.
func primaryPubSub(p point) (float64, bool) {
	if len(p.Primaries) == 0 {
		return 0, false
	}
	var sum float64
	for _, pr := range p.Primaries {
		for _, v := range []*float64{pr.Publish, pr.SPublish, pr.BusReceived} {
			if v == nil {
				return 0, false
			}
			sum += *v
		}
	}
	return sum / float64(len(p.Primaries)), true
}

// seriesKey names a scenario on a Redis set-up.
func seriesKey(p point) string { return fmt.Sprintf("%s@%s/%d", p.Scenario, p.Revision, p.Shards) }

// axis says how a family of charts places and groups the points.
type axis struct {
	prefix, xlabel string
	// title follows the metric's in the chart's title.
	title      string
	logX       bool
	x          func(point) float64
	key, label func(point) string
	style      func(point) int
}

// charts builds every chart of a data file that has at least one
// figure: each metric against N (one series per scenario and Redis
// set-up), and when the file has more than one Redis set-up, the
// metrics marked byShards against the number of primaries at the
// largest N measured (one series per scenario). Keys are the file
// names' suffixes ("throughput", "shards-throughput").
func charts(d *dataFile) map[string]*chart {
	setups := []int{}
	maxN := 0
	for _, p := range d.Points {
		if !slices.Contains(setups, p.Shards) {
			setups = append(setups, p.Shards)
		}
		maxN = max(maxN, p.N)
	}
	slices.Sort(setups)
	base := map[string]float64{}
	for _, p := range d.Points {
		if p.OK && p.N == 1 {
			base[seriesKey(p)] = p.OpsPerS
		}
	}
	byN := axis{
		xlabel: "nodes (N)", logX: maxN >= 8,
		x:   func(p point) float64 { return float64(p.N) },
		key: seriesKey,
		label: func(p point) string {
			name := p.Scenario + "@" + p.Revision
			switch {
			case p.Shards > 0:
				return fmt.Sprintf("%s, %d primaries", name, p.Shards)
			case len(setups) > 1:
				return name + ", one Redis"
			}
			return name
		},
		style: func(p point) int { return slices.Index(setups, p.Shards) },
	}
	note := fmt.Sprintf("nodes %g core, Redis %g core each, %d×N workers, %s per point, %d CPUs", d.Shares.Node, d.Shares.Redis, d.WorkersPerNode, d.Duration, d.Machine.CPUs)
	out := map[string]*chart{}
	build := func(a axis, points []point, m metric, note string) {
		c := &chart{Title: m.title + a.title, XLabel: a.xlabel, YLabel: m.ylabel, LogX: a.logX, Ref: m.ref,
			Note: note + "; open marker: another host saturated"}
		index := map[string]int{}
		for _, p := range points {
			v, ok := m.value(p, base)
			if !p.OK || !ok {
				continue
			}
			k := a.key(p)
			i, seen := index[k]
			if !seen {
				i = len(c.Series)
				index[k] = i
				c.Series = append(c.Series, series{Name: a.label(p), Style: a.style(p)})
			}
			c.Series[i].Points = append(c.Series[i].Points, xy{X: a.x(p), Y: v, Hollow: strings.HasPrefix(p.Limit, "saturated")})
		}
		if len(c.Series) > 0 {
			out[a.prefix+m.name] = c
		}
	}
	for _, m := range metrics {
		build(byN, d.Points, m, note)
	}
	if len(setups) < 2 {
		return out
	}
	// Against the number of primaries: each scenario's points at the
	// largest N of its Redis set-up.
	top := map[string]int{}
	for _, p := range d.Points {
		if p.OK {
			top[seriesKey(p)] = max(top[seriesKey(p)], p.N)
		}
	}
	var tops []point
	for _, p := range d.Points {
		if p.OK && p.N == top[seriesKey(p)] {
			tops = append(tops, p)
		}
	}
	byShards := axis{
		prefix: "shards-", xlabel: "Redis primaries (1: one standalone server)", title: ", by Redis primaries",
		x:     func(p point) float64 { return float64(max(p.Shards, 1)) },
		key:   func(p point) string { return p.Scenario + "@" + p.Revision },
		label: func(p point) string { return p.Scenario + "@" + p.Revision },
		style: func(point) int { return 0 },
	}
	for _, m := range metrics {
		if m.byShards {
			build(byShards, tops, m, note+", largest N")
		}
	}
	return out
}

// readData parses one data file.
func readData(r io.Reader) (*dataFile, error) {
	var d dataFile
	dec := json.NewDecoder(r)
	if err := dec.Decode(&d); err != nil {
		return nil, err
	}
	if len(d.Points) == 0 {
		return nil, errors.New("no points")
	}
	return &d, nil
}

// plotFile writes the charts of one data file into dir and returns the
// paths written.
func plotFile(path, dir string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, err := readData(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	name := strings.TrimSuffix(filepath.Base(path), ".json")
	cs := charts(d)
	var written []string
	var keys []string
	for _, prefix := range []string{"", "shards-"} {
		for _, m := range metrics {
			keys = append(keys, prefix+m.name)
		}
	}
	for _, k := range keys {
		c, ok := cs[k]
		if !ok {
			continue
		}
		out := filepath.Join(dir, name+"-"+k+".svg")
		if err := c.writeFile(out); err != nil {
			return written, err
		}
		written = append(written, out)
	}
	return written, nil
}

func main() {
	out := flag.String("out", "docs/scaling", "directory of the SVG files")
	soak := flag.String("soak", "", "draw this soak samples.csv (make soak) into its directory instead")
	storm := flag.String("storm", "", "draw this storm FILE.json (make storm) into FILE-resumed.svg and FILE-redis-cpu.svg instead")
	gobench := flag.String("gobench", "", "draw -metric of this go test -bench output into -o instead")
	metric := flag.String("metric", "", "with -gobench: the metric (unit) to draw")
	title := flag.String("title", "", "with -gobench: the chart's title")
	outFile := flag.String("o", "", "with -gobench: the SVG file to write")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: scaleplot [-out DIR] FILE.json...\n\nDraws the charts of scripts/scaleout.sh --data files as SVG: DIR/FILE-<chart>.svg.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *gobench != "" {
		if *metric == "" || *outFile == "" {
			fmt.Fprintln(os.Stderr, "scaleplot: -gobench needs -metric and -o")
			os.Exit(2)
		}
		if err := plotBench(*gobench, *metric, *title, *outFile); err != nil {
			fmt.Fprintln(os.Stderr, "scaleplot:", err)
			os.Exit(1)
		}
		fmt.Println(*outFile)
		return
	}
	if *soak != "" || *storm != "" {
		var written []string
		var err error
		if *soak != "" {
			written, err = plotSoak(*soak, filepath.Dir(*soak))
		} else {
			written, err = plotStorm(*storm)
		}
		for _, w := range written {
			fmt.Println(w)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "scaleplot:", err)
			os.Exit(1)
		}
		return
	}
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "scaleplot:", err)
		os.Exit(1)
	}
	code := 0
	for _, path := range flag.Args() {
		written, err := plotFile(path, *out)
		for _, w := range written {
			fmt.Println(w)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "scaleplot:", err)
			code = 1
		}
	}
	os.Exit(code)
}
