package main

import (
	"testing"

	"github.com/codelotse/codelotse/apps/internal/config"
	"github.com/codelotse/codelotse/pkg/httpserver"
	"github.com/codelotse/codelotse/pkg/jobs"
)

// TestDefaultsAgree: a default that config states for a library (which it
// does not import) is the library's own.
func TestDefaultsAgree(t *testing.T) {
	if config.DefaultMCPMaxConcurrent != httpserver.DefaultMaxConcurrentMCP {
		t.Errorf("MCP_MAX_CONCURRENT defaults to %d in config but %d in httpserver", config.DefaultMCPMaxConcurrent, httpserver.DefaultMaxConcurrentMCP)
	}
	if config.DefaultSecretRescanInterval != jobs.DefaultSecretRescanEvery {
		t.Errorf("SECRET_RESCAN_INTERVAL defaults to %v in config but %v in jobs", config.DefaultSecretRescanInterval, jobs.DefaultSecretRescanEvery)
	}
}
