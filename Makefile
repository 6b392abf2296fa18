# azure-ccm — every developer entry point. `make test` and `make demo` install what they need.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
BIN := $(CURDIR)/_output/bin
# Where the built Kubernetes/kwok tools live; hack/install-tools.sh fills it from a
# version-keyed cache outside the work tree so fresh clones on the same machine reuse it.
TOOLS_BIN := $(CURDIR)/_output/tools/bin
export AZURE_CCM_TOOLS_BIN := $(TOOLS_BIN)

# Every cmd/<name> that has Go files yet (binaries land as the project grows).
CMDS := $(sort $(patsubst %/,%,$(dir $(wildcard cmd/*/*.go))))

.PHONY: all build tools test test-unit test-integration test-e2e verify-deploy demo down lint fmt bench chaos fuzz clean images test-images

all: build

# The binaries the tests and the demo run. -tags testhooks lets the e2e tests stop a migration
# after a chosen phase (cmd/azure-cloud-controller-manager/testhooks.go); the images are built
# without it (make images). Static and -trimpath, as the images are built: the two builds then
# share every compiled package in the Go build cache, and on a cold cache the image build only
# links (build tags change only the files of the packages that have tagged files).
build:
	@mkdir -p $(BIN)
	$(if $(CMDS),CGO_ENABLED=0 $(GO) build -trimpath -tags testhooks -o $(BIN)/ $(addprefix ./,$(CMDS)),@echo "no commands to build yet")

tools:
	hack/install-tools.sh

# OCI images of every command, made without a daemon or a base image (hack/images): OCI layouts,
# a docker-archive of the host platform, SBOMs, digests.txt and chart values under
# _output/images. Reproducible: SOURCE_DATE_EPOCH defaults to the commit time.
images:
	$(GO) run ./hack/images

# The images run in podman (runc) as the chart runs them, against azsim and a kube-apiserver
# (test/images, build tag images). Installs podman and runc from Debian when missing. A missing
# runtime fails the tests.
test-images: tools images
	hack/install-podman.sh
	$(GO) test -tags images -count=1 -timeout 15m -v ./test/images/...

# Everything CI runs: tools, binaries, then the lint, unit, fuzz, integration, deploy and e2e
# stages (hack/test.sh; RACE=0 drops the race detector, STAGES="unit e2e" picks stages).
test: tools build
	hack/test.sh

test-unit:
	$(GO) test -race -count=1 -timeout 20m ./cmd/... ./internal/...

test-integration: tools build
	$(GO) test -race -count=1 -timeout 10m ./test/framework/... ./test/integration/...

# deploy/: helm lint/template, manifests in sync, kubeconform, dry-run, dashboard and docs
# against the code (hack/test.sh runs it too). `hack/verify-deploy.sh --update` regenerates
# deploy/manifests.
verify-deploy: tools
	hack/verify-deploy.sh

# One e2e test: make test-e2e E2E_RUN=TestName
test-e2e: tools build
	$(GO) test -count=1 -timeout 30m -parallel 64 $(if $(E2E_RUN),-run '$(E2E_RUN)' -v) ./test/e2e/...

demo: tools build
	hack/demo.sh up

down:
	hack/demo.sh down

lint:
	hack/lint.sh

fmt:
	gofmt -w cmd internal test

# Every fuzz target for FUZZ_TIME each (default 60s; a count such as 5000x is a number of
# executions); `make test` runs 500 executions each. FUZZ_RUN=<regexp> narrows the targets.
fuzz:
	hack/fuzz.sh $(if $(FUZZ_TIME),$(FUZZ_TIME),60s)

bench: tools build
	hack/bench.sh

chaos: tools build
	hack/chaos.sh

clean:
	hack/demo.sh down || true
	rm -rf _output
