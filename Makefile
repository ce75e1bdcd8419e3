# CodeLotse MCP. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
# The Go toolchain that go.mod pins (a Go release with the standard
# library's known vulnerabilities fixed). Machines here start with
# GOTOOLCHAIN=local, which ignores go.mod's toolchain line, so every target
# asks for it explicitly; the go command fetches it from the Go module proxy
# once (about 76 MB). `make CODELOTSE_GO_TOOLCHAIN=local ...` uses the
# machine's own Go instead.
CODELOTSE_GO_TOOLCHAIN ?= $(shell sed -n 's/^toolchain //p' go.mod)
export GOTOOLCHAIN := $(CODELOTSE_GO_TOOLCHAIN)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GITLEAKS := github.com/zricethezav/gitleaks/v8@v8.30.1

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build api, worker and cltctl into bin/
	$(GO) build -o bin/ ./apps/api ./apps/worker ./apps/cltctl

.PHONY: run
run: build ## find or start PostgreSQL, migrate, seed the demo, print a token and serve on PUBLIC_URL
	./scripts/dev.sh

.PHONY: test
test: ## the whole suite with the race detector: unit, PostgreSQL-backed and end-to-end tests (needs PostgreSQL, see README)
	@# Everything under -race; -short only trims the redactor's two long
	@# comparisons with gitleaks (pure regex work, 5-10x slower under the race
	@# detector), which then run in full without it.
	$(GO) test -race -short -count=1 ./...
	$(GO) test -count=1 ./pkg/secretscan/
	@# The e2e tests run in parallel (two at a time on two cores): about
	@# 2.5 minutes; serially they took 7-13 minutes, past go test's default
	@# 10-minute timeout on a slow machine. The longer timeout stays so that a
	@# slow machine makes the run longer rather than red.
	$(GO) test -race -count=1 -timeout 30m -tags e2e ./e2e/...

.PHONY: unit
unit: ## fast loop: the root module's tests with -short (skips the slow gitleaks comparisons; still PostgreSQL-backed)
	$(GO) test -short ./...

.PHONY: e2e
e2e: ## end-to-end tests against the built binaries
	$(GO) test -count=1 -tags e2e -v ./e2e/...

.PHONY: conformance
conformance: ## the official MCP conformance suite against the built API (part of make test; npm ci in e2e/conformance)
	$(GO) test -count=1 -tags e2e -run 'TestConformance' -v ./e2e/

.PHONY: soak
soak: ## open-loop soak with a PostgreSQL restart on a private cluster (SOAK_RATE=600 SOAK_DURATION=10m; see docs/benchmarks.md)
	SOAK_RATE=$${SOAK_RATE:-600} SOAK_DURATION=$${SOAK_DURATION:-10m} SOAK_STRICT=$${SOAK_STRICT:-1} \
		$(GO) test -count=1 -tags e2e -run '^TestSoak$$' -v -timeout 60m ./e2e/

.PHONY: lint
lint: ## gofmt, go vet, staticcheck, go mod tidy (every module), deploy/ manifests, no binaries or files over 1 MB, import boundaries, gitleaks
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	$(GO) run $(STATICCHECK) ./...
	cd e2e && $(GO) run $(STATICCHECK) -tags e2e ./...
	@# -diff changes nothing and fails when tidy would change go.mod or go.sum.
	GOWORK=off $(GO) mod tidy -diff
	cd e2e && GOWORK=off $(GO) mod tidy -diff
	cd deploy/kubecheck && GOWORK=off $(GO) mod tidy -diff
	@# deploy/: Kubernetes manifests decoded strictly into k8s.io/api types, and docker-compose.yml's promises (offline; see docs/operations.md).
	cd deploy/kubecheck && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -count=1 ./... && GOWORK=off $(GO) run . ../kubernetes/*.yaml ../secret.example.yaml
	scripts/check-tracked-files.sh
	@# Import boundaries: pgx only under pkg/postgres, the MCP SDK only in pkg/mcpserver, Echo only in pkg/httpserver.
	scripts/check-imports.sh
	$(MAKE) --no-print-directory secrets

.PHONY: kubeconform
kubeconform: ## kubeconform -strict on deploy/ (needs network: it downloads its JSON schemas from GitHub)
	GOWORK=off $(GO) run github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0 -strict -summary deploy/kubernetes/*.yaml deploy/secret.example.yaml

.PHONY: vuln
vuln: ## govulncheck on both modules (needs the vulnerability database; says so when it is unreachable)
	scripts/vuln.sh

.PHONY: secrets
secrets: ## scan the tree with the project's gitleaks configuration
	$(GO) run $(GITLEAKS) dir --no-banner --redact --config policies/gitleaks.toml .

.PHONY: clean
clean: ## remove build output
	rm -rf bin/
