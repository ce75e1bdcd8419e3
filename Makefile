# CodeLotse MCP. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
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
test: ## the whole suite: unit, PostgreSQL-backed and end-to-end tests (needs PostgreSQL, see README)
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -tags e2e ./e2e/...

.PHONY: unit
unit: ## the root module's tests only (still PostgreSQL-backed where storage is involved)
	$(GO) test ./...

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
lint: ## gofmt, go vet and staticcheck on both modules
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	$(GO) run $(STATICCHECK) ./...
	cd e2e && $(GO) run $(STATICCHECK) -tags e2e ./...

.PHONY: secrets
secrets: ## scan the tree with the project's gitleaks configuration
	$(GO) run $(GITLEAKS) dir --no-banner --redact --config policies/gitleaks.toml .

.PHONY: clean
clean: ## remove build output
	rm -rf bin/
