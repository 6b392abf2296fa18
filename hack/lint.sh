#!/usr/bin/env bash
# gofmt, go vet and staticcheck (pinned in hack/versions.env, installed through the module
# proxy into the same version-keyed cache as the other tools).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
# shellcheck source=hack/versions.env
source hack/versions.env
GO="${GO:-go}"
CACHE_ROOT="${AZURE_CCM_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/azure-ccm/tools}"
SC_DIR="${CACHE_ROOT}/staticcheck-${STATICCHECK_VERSION}"

rc=0
echo "gofmt"
unformatted="$(gofmt -l cmd internal test 2>/dev/null || true)"
if [[ -n "${unformatted}" ]]; then
  echo "files need gofmt:"
  echo "${unformatted}"
  rc=1
fi

echo "go vet"
"${GO}" vet ./... || rc=1

if [[ ! -x "${SC_DIR}/staticcheck" ]]; then
  echo "installing staticcheck ${STATICCHECK_VERSION}"
  GOBIN="${SC_DIR}" CGO_ENABLED=0 "${GO}" install "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}"
fi
echo "staticcheck"
"${SC_DIR}/staticcheck" ./... || rc=1

exit "${rc}"
