#!/usr/bin/env bash
# The lint stage of `make test` (and `make lint`): gofmt, go vet under every build
# configuration the repository has, and golangci-lint with .golangci.yml.
#
# Build configurations: the default one; `bench` and `chaos` (test/bench, test/chaos: the
# long benchmark and chaos runs, never run by `make test`, so vet and golangci-lint are what
# keeps them compiling); `images` (test/images, the container tests); GOOS=windows for the node manager's Windows file.
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

step gofmt gofmt_check
step "go vet" "${GO}" vet ./...
step "go vet -tags bench,chaos,images" "${GO}" vet -tags bench,chaos,images ./test/...
step "go vet -tags testhooks" "${GO}" vet -tags testhooks ./cmd/azure-cloud-controller-manager/
step "go vet (GOOS=windows)" env GOOS=windows "${GO}" vet ./cmd/azure-cloud-node-manager/
step "install golangci-lint" install_golangci_lint
if [[ -x "${GL}" ]]; then
  step "golangci-lint" "${GL}" run --build-tags bench ./...
  step "golangci-lint (chaos)" "${GL}" run --build-tags chaos ./test/chaos/...
  step "golangci-lint (images)" "${GL}" run --build-tags images ./test/images/...
  step "golangci-lint (testhooks)" "${GL}" run --build-tags testhooks ./cmd/azure-cloud-controller-manager/
fi
exit "${rc}"
