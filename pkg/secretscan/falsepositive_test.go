package secretscan

import (
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestFalsePositivesGoSource redacts net/http's Go sources, ordinary code
// and prose without secrets, whole files and line by line (as code lines
// reach Redact), and reports what fires.
func TestFalsePositivesGoSource(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(build.Default.GOROOT, "src", "net", "http", "*.go"))
	if err != nil || len(files) == 0 {
		t.Skipf("no Go sources under %s", build.Default.GOROOT)
	}
	r := New()
	whole, lines := map[string]int{}, map[string]int{}
	size := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		size += len(b)
		_, counts := r.Redact(string(b))
		for id, n := range counts {
			whole[id] += n
		}
		for _, l := range strings.Split(string(b), "\n") {
			_, counts := r.Redact(l)
			for id, n := range counts {
				lines[id] += n
			}
		}
	}
	t.Logf("%d files, %d bytes: %d redactions as whole files %v, %d line by line %v",
		len(files), size, total(whole), sortedCounts(whole), total(lines), sortedCounts(lines))
	// Measured: none. A few would be tolerable; many mean a rule or a
	// relaxed variant has gone wrong.
	if total(whole) > 3 || total(lines) > 3 {
		t.Errorf("too many false positives in net/http")
	}
}

// TestFalsePositivesReviewText: the generator's realistic review text holds
// no secrets.
func TestFalsePositivesReviewText(t *testing.T) {
	t.Parallel()
	r := New()
	for seed := uint64(0); seed < 20; seed++ {
		s := newReviewGen(seed).text(32 * 1024)
		if out, counts := r.Redact(s); counts != nil || out != s {
			t.Errorf("seed %d: redactions %v in secret-free review text", seed, counts)
		}
	}
}

func sortedCounts(m map[string]int) []string {
	var out []string
	for id, n := range m {
		out = append(out, fmt.Sprintf("%s=%d", id, n))
	}
	sort.Strings(out)
	return out
}
