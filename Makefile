# azure-ccm — every developer entry point. `make test` and `make demo` install what they need.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
BIN := $(CURDIR)/_output/bin
# Where the built Kubernetes/kwok tools live; hack/install-tools.sh fills it from a
# version-keyed cache outside the work tree so fresh clones on the same machine reuse it.
TOOLS_BIN := $(CURDIR)/_output/tools/bin
export AZURE_CCM_TOOLS_BIN := $(TOOLS_BIN)

BINARIES := azure-cloud-controller-manager azure-cloud-node-manager azsim

.PHONY: all build tools test test-unit test-integration test-e2e demo down lint fmt bench chaos clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))

tools:
	hack/install-tools.sh

test: tools build
	hack/test.sh

test-unit:
	$(GO) test -count=1 ./cmd/... ./internal/...

test-integration: tools build
	$(GO) test -count=1 -timeout 20m ./test/framework/... ./test/integration/...

test-e2e: tools build
	$(GO) test -count=1 -timeout 30m ./test/e2e/...

demo: tools build
	hack/demo.sh up

down:
	hack/demo.sh down

lint:
	hack/lint.sh

fmt:
	gofmt -w cmd internal test

bench: tools build
	hack/bench.sh

chaos: tools build
	hack/chaos.sh

clean:
	rm -rf _output
