package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestComposeFile checks the deployment promises of docker-compose.yml that
// a reader relies on (there is no Docker Compose on the CI machine to run
// it): required settings fail loudly, PostgreSQL is not published, the API
// has a health check, one image is built once and named, and the GitHub key
// mount cannot turn into a directory.
func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for _, v := range []string{"PUBLIC_URL", "POSTGRES_PASSWORD", "APP_DATABASE_PASSWORD"} {
		if !regexp.MustCompile(`\$\{` + v + `:\?[^}]+\}`).MatchString(text) {
			t.Errorf("%s is not required with ${%s:?message}", v, v)
		}
		if regexp.MustCompile(`\$\{` + v + `:-`).MatchString(text) {
			t.Errorf("%s has a silent default", v)
		}
	}
	var doc struct {
		Services map[string]struct {
			Image       string         `json:"image"`
			Build       any            `json:"build"`
			Ports       []any          `json:"ports"`
			Healthcheck map[string]any `json:"healthcheck"`
			Volumes     []any          `json:"volumes"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Services["db"].Ports) != 0 {
		t.Error("PostgreSQL is published on the host")
	}
	hc, _ := doc.Services["api"].Healthcheck["test"].([]any)
	if len(hc) == 0 || !strings.Contains(strings.Join(strs(hc), " "), "/readyz") {
		t.Errorf("the API's health check does not ask /readyz: %v", hc)
	}
	builds, images := 0, map[string]bool{}
	for name, s := range doc.Services {
		if s.Build != nil {
			builds++
		}
		if name != "db" {
			images[s.Image] = true
		}
	}
	if builds != 1 || len(images) != 1 || images[""] {
		t.Errorf("%d builds and images %v; want one build of one named image", builds, images)
	}
	found := false
	for _, v := range doc.Services["worker"].Volumes {
		m, ok := v.(map[string]any)
		if !ok {
			t.Errorf("worker volume %v uses the short syntax, which creates a missing file as a directory", v)
			continue
		}
		if m["target"] == "/run/secrets/github-app.pem" {
			bind, _ := m["bind"].(map[string]any)
			found = m["type"] == "bind" && bind["create_host_path"] == false
		}
	}
	if !found {
		t.Error("the GitHub key is not a bind mount with create_host_path: false")
	}
	if dev, err := os.ReadFile("../../docker-compose.dev.yml"); err != nil || !strings.Contains(string(dev), `"127.0.0.1:5432:5432"`) {
		t.Errorf("docker-compose.dev.yml does not publish PostgreSQL on loopback for make run: %v", err)
	}
}

func strs(xs []any) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i], _ = x.(string)
	}
	return out
}
