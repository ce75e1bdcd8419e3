package logfilter

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestAtLeast(t *testing.T) {
	var buf bytes.Buffer
	l := AtLeast(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), slog.LevelWarn)
	l.Info("routine")
	l.With("k", "v").WithGroup("g").Warn("kept", "x", 1)
	out := buf.String()
	if strings.Contains(out, "routine") || !strings.Contains(out, "kept") || !strings.Contains(out, "k=v") || !strings.Contains(out, "g.x=1") {
		t.Fatalf("filtered output:\n%s", out)
	}
	if AtLeast(nil, slog.LevelWarn) != nil {
		t.Fatal("a nil logger must stay nil")
	}
}
