#!/usr/bin/env bash
# The lint stage of `make test` (and `make lint`): gofmt, then golangci-lint with .golangci.yml
# or go vet under every build configuration the repository has (golangci-lint's govet linter
# runs go vet's analyzers), and the Windows-only code.
#
# Build configurations: golangci-lint runs once with the tags that only add files (`bench`:
# test/bench, the long benchmarks; `images`: test/images, the container tests; `testhooks`:
# the CCM's crash hooks), and once with `chaos` (test/chaos's long run; its short variant is the
# `!chaos` file). Each run analyses the dependencies again, so the configurations are kept to
# the few whose files differ. The CCM's command without tags differs by one file of one stub
# function (testhooks_off.go): go vet checks that configuration, where a third golangci-lint
# run would analyse the command's whole dependency tree again for those lines (77 s on a cold
# two-core machine).
#
# Windows: internal/windowsservice holds the only code that differs by OS; go vet checks it
# for GOOS=windows, and `go list` checks that every package the node manager imports builds
# for Windows. Vetting the whole node manager for Windows would compile its Kubernetes
# dependencies for a second platform (six minutes on a cold two-core machine) to check no
# other Windows file.
#
# golangci-lint loads every dependency from the export data `go list -export` compiles into the Go
# build cache. It runs with make build's flags (CGO_ENABLED=0, -trimpath), so that export data is
# what make build already compiled: with cgo on and full paths, every package is compiled a second
# time (two packages' dependencies, on two cores: 241 s with an empty build cache, 33 s after
# make build's compile).
#
# golangci-lint is pinned in hack/versions.env and built through the Go module proxy into the
# same cache outside the work tree as the other tools (one build per version, a few minutes).
#
# Env: AZURE_CCM_TOOLS_CACHE (the cache root, as for hack/install-tools.sh).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
# shellcheck source=hack/versions.env
source hack/versions.env
GO="${GO:-go}"
CACHE_ROOT="${AZURE_CCM_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/azure-ccm/tools}"
GL_DIR="${CACHE_ROOT}/golangci-lint-${GOLANGCI_LINT_VERSION}"
GL="${GL_DIR}/golangci-lint"

rc=0
step() {
  local name="$1" start
  shift
  echo "--- ${name}"
  start=$(date +%s)
  "$@" || rc=1
  echo "    (${name}: $(($(date +%s) - start))s)"
}

gofmt_check() {
  local unformatted
  unformatted="$(gofmt -l cmd internal test deploy 2>&1)"
  [[ -z "${unformatted}" ]] && return 0
  echo "files need gofmt:"
  echo "${unformatted}"
  return 1
}

install_golangci_lint() {
  [[ -x "${GL}" ]] && return 0
  mkdir -p "${CACHE_ROOT}"
  # One builder at a time: a second lint run waits, then finds the binary.
  (
    flock 9
    [[ -x "${GL}" ]] && exit 0
    echo "building golangci-lint ${GOLANGCI_LINT_VERSION}"
    rm -rf "${GL_DIR}.partial"
    GOBIN="${GL_DIR}.partial" CGO_ENABLED=0 "${GO}" install -trimpath \
      "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}" &&
      rm -rf "${GL_DIR}" && mv "${GL_DIR}.partial" "${GL_DIR}"
  ) 9>"${CACHE_ROOT}/golangci-lint.lock"
}

# windows_deps prints every package of the node manager's import graph that does not build
# for Windows (a file constraint or an import only another OS has), and fails if there is one.
windows_deps() {
  local broken
  broken="$(GOOS=windows "${GO}" list -deps -e -f '{{with .Error}}{{$.ImportPath}}: {{.}}{{end}}' ./cmd/azure-cloud-node-manager/ | grep -v '^$')"
  [[ -z "${broken}" ]] && return 0
  echo "packages of the node manager that do not build for Windows:"
  echo "${broken}"
  return 1
}

step gofmt gofmt_check
step "go vet (GOOS=windows)" env GOOS=windows "${GO}" vet ./internal/windowsservice/
step "node manager imports (GOOS=windows)" windows_deps
step "install golangci-lint" install_golangci_lint
if [[ -x "${GL}" ]]; then
  export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+${GOFLAGS} }-trimpath"
  step "golangci-lint (bench,images,testhooks)" "${GL}" run --build-tags bench,images,testhooks ./...
  step "golangci-lint (chaos)" "${GL}" run --build-tags chaos ./test/chaos/...
  step "go vet (no tags: the CCM command)" "${GO}" vet ./cmd/azure-cloud-controller-manager/
else
  rc=1
fi
exit "${rc}"
