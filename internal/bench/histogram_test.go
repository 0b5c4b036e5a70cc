package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exactQuantile is the nearest-rank quantile of sorted samples.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	if q <= 0 {
		return sorted[0]
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = max(rank, 1)
	return sorted[rank-1]
}

func TestBucketsCoverEveryValue(t *testing.T) {
	prevHi := int64(-1)
	for i := 0; i < nBuckets; i++ {
		lo, hi := bucketRange(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, want %d (no gap, no overlap)", i, lo, prevHi+1)
		}
		if hi < lo {
			t.Fatalf("bucket %d: hi %d < lo %d", i, hi, lo)
		}
		for _, v := range []int64{lo, hi, lo + (hi-lo)/2} {
			if got := bucketOf(v); got != i {
				t.Fatalf("bucketOf(%d) = %d, want %d", v, got, i)
			}
		}
		if lo >= subCount {
			if rel := float64(hi-lo+1) / float64(lo); rel > 1.0/halfSub+1e-12 {
				t.Fatalf("bucket %d [%d,%d] is %.4f wide relative to its start, want ≤ %.4f", i, lo, hi, rel, 1.0/halfSub)
			}
		}
		prevHi = hi
		if hi == math.MaxInt64 {
			return
		}
	}
	t.Fatalf("buckets end at %d, before MaxInt64", prevHi)
}

func TestQuantileSmallExact(t *testing.T) {
	// Values below subCount nanoseconds are recorded exactly.
	var h Histogram
	for _, v := range []int{5, 1, 4, 2, 3} {
		h.Record(time.Duration(v))
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0, 1}, {0.2, 1}, {0.21, 2}, {0.5, 3}, {0.8, 4}, {0.81, 5}, {0.99, 5}, {1, 5},
	}
	for _, tt := range tests {
		if got := h.Quantile(tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if h.Count() != 5 || h.Min() != 1 || h.Max() != 5 || h.Mean() != 3 {
		t.Errorf("count/min/max/mean = %d/%v/%v/%v, want 5/1/5/3", h.Count(), h.Min(), h.Max(), h.Mean())
	}
}

func TestQuantileRelativeError(t *testing.T) {
	dists := []struct {
		name string
		gen  func(r *rand.Rand) time.Duration
	}{
		{"uniform 0-10ms", func(r *rand.Rand) time.Duration { return time.Duration(r.Int64N(int64(10 * time.Millisecond))) }},
		{"lognormal around 1ms", func(r *rand.Rand) time.Duration {
			return time.Duration(math.Exp(r.NormFloat64()*1.2) * float64(time.Millisecond))
		}},
		{"bimodal 200µs/50ms", func(r *rand.Rand) time.Duration {
			if r.IntN(100) < 97 {
				return 200*time.Microsecond + time.Duration(r.IntN(50000))
			}
			return 50*time.Millisecond + time.Duration(r.IntN(5000000))
		}},
		{"tiny, near exact range", func(r *rand.Rand) time.Duration { return time.Duration(r.IntN(1000)) }},
	}
	for _, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var h Histogram
			samples := make([]time.Duration, 20000)
			for i := range samples {
				samples[i] = d.gen(r)
				h.Record(samples[i])
			}
			slices.Sort(samples)
			for _, q := range []float64{0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1} {
				want := exactQuantile(samples, q)
				got := h.Quantile(q)
				diff := math.Abs(float64(got - want))
				// Half a bucket, plus one nanosecond of rounding.
				if limit := float64(want)/float64(halfSub)/2 + 1; diff > limit {
					t.Errorf("Quantile(%v) = %v, exact %v: off by %v, want ≤ %.0fns", q, got, want, time.Duration(diff), limit)
				}
			}
			if h.Max() != samples[len(samples)-1] || h.Min() != samples[0] {
				t.Errorf("min/max = %v/%v, want %v/%v", h.Min(), h.Max(), samples[0], samples[len(samples)-1])
			}
		})
	}
}

func TestMergeEqualsRecordingAll(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var a, b, all Histogram
	for i := 0; i < 5000; i++ {
		v := time.Duration(r.Int64N(int64(time.Second)))
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
		all.Record(v)
	}
	a.Merge(&b)
	if a.counts != all.counts || a.n != all.n || a.min != all.min || a.max != all.max {
		t.Fatalf("merged histogram differs from one recording every sample")
	}
	var empty Histogram
	a.Merge(&empty)
	if a.n != all.n {
		t.Fatalf("merging an empty histogram changed the count to %d", a.n)
	}
}

func TestEmptyAndNegative(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Mean() != 0 || h.Summary().Count != 0 {
		t.Fatalf("empty histogram: got non-zero statistics")
	}
	h.Record(-time.Second)
	if h.Min() != 0 || h.Max() != 0 || h.Count() != 1 {
		t.Fatalf("negative sample: min/max/count = %v/%v/%d, want 0/0/1", h.Min(), h.Max(), h.Count())
	}
	h.Record(time.Duration(math.MaxInt64))
	if h.Quantile(1) != time.Duration(math.MaxInt64) {
		t.Fatalf("Quantile(1) = %v, want MaxInt64", h.Quantile(1))
	}
}

func TestSummaryMillis(t *testing.T) {
	var h Histogram
	for i := 1; i <= 100; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	s := h.Summary()
	near := func(got, want float64) bool { return math.Abs(got-want) <= want/float64(halfSub) }
	if s.Count != 100 || !near(s.P50, 50) || !near(s.P90, 90) || !near(s.P99, 99) || s.Max != 100 || s.Min != 1 || !near(s.Mean, 50.5) {
		t.Fatalf("got %+v, want p50≈50 p90≈90 p99≈99 max 100 min 1 mean 50.5", s)
	}
}

func TestRecorderReset(t *testing.T) {
	var r Recorder
	r.Record(time.Millisecond)
	r.Record(2 * time.Millisecond)
	if got := r.Snapshot().Count(); got != 2 {
		t.Fatalf("snapshot count = %d, want 2", got)
	}
	if got := r.Reset().Count(); got != 2 {
		t.Fatalf("reset returned %d samples, want 2", got)
	}
	if got := r.Snapshot().Count(); got != 0 {
		t.Fatalf("after reset: %d samples, want 0", got)
	}
}

func BenchmarkRecord(b *testing.B) {
	var h Histogram
	d := 1234567 * time.Nanosecond
	for b.Loop() {
		h.Record(d)
	}
}
