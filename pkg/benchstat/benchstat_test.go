package benchstat

import (
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	ten := make([]time.Duration, 10)
	for i := range ten {
		ten[i] = time.Duration(i+1) * time.Millisecond // 1..10 ms
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1)
	}
	for _, tc := range []struct {
		name    string
		samples []time.Duration
		q       float64
		want    time.Duration
	}{
		{"none", nil, 0.9, 0},
		{"one", []time.Duration{7}, 0.5, 7},
		{"one p99", []time.Duration{7}, 0.99, 7},
		// The ninth of ten calls, not the slowest: one slow call in
		// ten is beyond the p90.
		{"p90 of ten", ten, 0.9, 9 * time.Millisecond},
		{"p50 of ten", ten, 0.5, 5 * time.Millisecond},
		{"p100 of ten", ten, 1, 10 * time.Millisecond},
		{"p91 of ten rounds up", ten, 0.91, 10 * time.Millisecond},
		{"p1 of ten", ten, 0.01, time.Millisecond},
		{"p99 of a hundred", hundred, 0.99, 99},
		{"p99.9 of a hundred", hundred, 0.999, 100},
		{"p50 of a hundred", hundred, 0.5, 50},
		{"p70 of ten (0.7*10 is 7.000000000000001)", ten, 0.7, 7 * time.Millisecond},
	} {
		if got := Percentile(tc.samples, tc.q); got != tc.want {
			t.Errorf("%s: Percentile(q=%v) = %v, want %v", tc.name, tc.q, got, tc.want)
		}
	}
}

func TestMetricNames(t *testing.T) {
	for q, want := range map[float64]string{0.5: "p50-ms", 0.9: "p90-ms", 0.99: "p99-ms", 0.999: "p99.9-ms"} {
		if got := metric(q, "ms"); got != want {
			t.Errorf("metric(%v) = %q, want %q", q, got, want)
		}
	}
}
