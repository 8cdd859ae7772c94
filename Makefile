# Butler provider operator. `make help` lists the targets.
CARGO ?= cargo

.PHONY: help run build test fmt lint unit crds bench

help: ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-8s %s\n", $$1, $$2}'

run: ## Run the main job: print every CRD of the workspace as YAML
	$(CARGO) run -q -p butler-operator --bin butler-operator -- crds

build: ## Build every crate and binary
	$(CARGO) build --workspace --all-targets

test: fmt lint unit ## Format check, clippy with -D warnings, and every test (what CI runs)

fmt: ## Check formatting
	$(CARGO) fmt --all -- --check

lint: ## Clippy on every target, warnings are errors
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit: ## Every test of the workspace
	$(CARGO) test --workspace

crds: ## Regenerate crds/ from the API types (one file per CRD)
	$(CARGO) run -q -p butler-operator --bin butler-operator -- crds --dir crds

bench: ## Run the criterion benchmarks
	$(CARGO) bench --workspace
