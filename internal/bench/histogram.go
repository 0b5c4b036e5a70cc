// Package bench holds the arithmetic of the load generator (cmd/mcpbench)
// and the report generator (bench/cmd/benchrun): a latency histogram with
// bounded relative error and its percentiles, error accounting by kind,
// the process's own CPU share, a minimal Redis probe that reads command
// statistics and counts round trips, and the JSON report that ties them
// together.
package bench

import (
	"math"
	"math/bits"
	"sync"
	"time"
)

// subBits sets the histogram's precision: every bucket above 2^subBits ns
// spans 1/2^(subBits-1) of its lower bound or less, so a percentile read
// from it is within 0.4% (half a bucket) of the exact sample.
const subBits = 8

const (
	subCount = 1 << subBits // values below this are exact
	halfSub  = subCount / 2 // buckets per power of two above it
	nBuckets = subCount + (64-subBits)*halfSub
)

// Histogram records non-negative durations in fixed memory (about 58 KiB)
// with a bounded relative error. Min, max, count and mean are exact. The
// zero value is empty and ready to use. A Histogram is not safe for
// concurrent use; Recorder is.
type Histogram struct {
	counts [nBuckets]uint64
	n      uint64
	sum    float64 // ns
	min    int64
	max    int64
}

// bucketOf maps v ≥ 0 to its bucket index.
func bucketOf(v int64) int {
	if v < subCount {
		return int(v)
	}
	u := uint64(v)
	shift := bits.Len64(u) - subBits // ≥ 1
	top := u >> uint(shift)          // in [halfSub, subCount)
	return subCount + (shift-1)*halfSub + int(top-halfSub)
}

// bucketRange returns the smallest and largest value of bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < subCount {
		return int64(i), int64(i)
	}
	j := i - subCount
	shift := j/halfSub + 1
	top := uint64(j%halfSub + halfSub)
	lo64 := top << uint(shift)
	hi64 := (top+1)<<uint(shift) - 1
	if hi64 > math.MaxInt64 || hi64 < lo64 {
		hi64 = math.MaxInt64
	}
	return int64(lo64), int64(hi64)
}

// Record adds one sample; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// Merge adds every sample of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Count returns the number of samples.
func (h *Histogram) Count() uint64 { return h.n }

// Min returns the smallest sample (0 when empty).
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Max returns the largest sample (0 when empty).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean returns the arithmetic mean (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) by the nearest-rank
// method: the smallest recorded value v such that at least ⌈q·n⌉ samples
// are ≤ v, read from its bucket as the bucket's midpoint and clamped to
// [Min, Max]. Quantile(0) is Min and Quantile(1) is Max, exactly. An empty
// histogram returns 0.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return time.Duration(h.min)
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			mid := lo + (hi-lo)/2
			return time.Duration(min(max(mid, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

// Summary condenses the histogram.
func (h *Histogram) Summary() Summary {
	return Summary{
		Count: h.n,
		Min:   Millis(h.Min()),
		Mean:  Millis(h.Mean()),
		P50:   Millis(h.Quantile(0.50)),
		P90:   Millis(h.Quantile(0.90)),
		P99:   Millis(h.Quantile(0.99)),
		P999:  Millis(h.Quantile(0.999)),
		Max:   Millis(h.Max()),
	}
}

// Summary is a latency distribution in milliseconds, as reports carry it.
type Summary struct {
	Count uint64  `json:"count"`
	Min   float64 `json:"min_ms"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

// Millis converts a duration to fractional milliseconds.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Recorder is a Histogram safe for concurrent use.
type Recorder struct {
	mu sync.Mutex
	h  Histogram
}

// Record adds one sample.
func (r *Recorder) Record(d time.Duration) {
	r.mu.Lock()
	r.h.Record(d)
	r.mu.Unlock()
}

// Snapshot returns a copy of the histogram so far.
func (r *Recorder) Snapshot() *Histogram {
	h := new(Histogram)
	r.mu.Lock()
	*h = r.h
	r.mu.Unlock()
	return h
}

// Reset empties the recorder and returns what it held.
func (r *Recorder) Reset() *Histogram {
	h := new(Histogram)
	r.mu.Lock()
	*h = r.h
	r.h = Histogram{}
	r.mu.Unlock()
	return h
}
