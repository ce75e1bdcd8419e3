package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
        - name: api
          image: codelotse:1
          ports: [{containerPort: 8080}]
          readinessProbe: {httpGet: {path: /readyz, port: 8080}}
`

// TestCheckRefusesBrokenManifests: each mistake is reported; the good
// manifest passes.
func TestCheckRefusesBrokenManifests(t *testing.T) {
	if errs := checkFile([]byte("# a comment\n---\n" + deployment)); len(errs) > 0 {
		t.Fatalf("good manifest: %v", errs)
	}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown field", strings.Replace(deployment, "replicas: 2", "replica: 2", 1), "unknown field"},
		{"wrong type", strings.Replace(deployment, "replicas: 2", "replicas: two", 1), "replicas"},
		{"unknown kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", "not one this project uses"},
		{"selector mismatch", strings.Replace(deployment, "labels: {app: api}", "labels: {app: other}", 1), "does not match"},
		{"no readiness on /readyz", strings.Replace(deployment, "path: /readyz", "path: /healthz", 1), "readinessProbe"},
		{"no image", strings.Replace(deployment, "image: codelotse:1", "image: \"\"", 1), "image"},
		{"empty file", "# nothing\n", "no Kubernetes object"},
		{"job restart policy", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: m}\nspec:\n  template:\n    spec:\n      restartPolicy: Always\n      containers: [{name: m, image: x}]\n", "restartPolicy"},
	} {
		errs := checkFile([]byte(tc.doc))
		if len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%s: errors %v, want one saying %q", tc.name, errs, tc.want)
		}
	}
}

// TestProjectManifests: the manifests in deploy/ pass (what make lint runs).
func TestProjectManifests(t *testing.T) {
	files, _ := filepath.Glob("../kubernetes/*.yaml")
	files = append(files, "../secret.example.yaml")
	if len(files) < 2 {
		t.Fatal("no manifests found")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range checkFile(data) {
			t.Errorf("%s: %v", f, err)
		}
	}
}
