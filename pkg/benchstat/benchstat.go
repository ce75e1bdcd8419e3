// Package benchstat summarises the latencies that the repository's
// benchmarks measure. It exists so that every benchmark means the same thing
// by "p90": the nearest-rank percentile, the smallest sample with at least
// that share of the samples at or below it. Indexing a sorted slice at
// len*9/10, as the benchmarks once did, reports the slowest of ten calls as
// their p90.
//
// It does no I/O and imports nothing outside the standard library, so that
// any package's benchmarks can use it.
package benchstat

import (
	"math"
	"slices"
	"strconv"
	"testing"
	"time"
)

// Percentile is the nearest-rank q-quantile (0 < q <= 1) of samples sorted
// in ascending order; zero for no samples.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// ceil(q*n), less a hair so that exact ranks stay exact (0.9*10 is
	// 9.000000000000002 in float64, whose ceiling would be 10).
	rank := int(math.Ceil(q*float64(len(sorted)) - 1e-9))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// ReportMs sorts samples and reports the named quantiles in milliseconds
// (metric "p50-ms" for 0.5, "p90-ms" for 0.9, "p99-ms" for 0.99, ...).
func ReportMs(b *testing.B, samples []time.Duration, qs ...float64) {
	b.Helper()
	slices.Sort(samples)
	for _, q := range qs {
		b.ReportMetric(float64(Percentile(samples, q).Microseconds())/1000, metric(q, "ms"))
	}
}

// ReportNs is ReportMs in nanoseconds ("p50-ns"), for sub-millisecond work.
func ReportNs(b *testing.B, samples []time.Duration, qs ...float64) {
	b.Helper()
	slices.Sort(samples)
	for _, q := range qs {
		b.ReportMetric(float64(Percentile(samples, q).Nanoseconds()), metric(q, "ns"))
	}
}

// metric names a quantile: 0.9 is "p90-ms", 0.999 "p99.9-ms".
func metric(q float64, unit string) string {
	return "p" + strconv.FormatFloat(math.Round(q*1000)/10, 'f', -1, 64) + "-" + unit
}
