#!/usr/bin/env bash
# Chaos scenarios (injected ARM faults, CCM restarts): test/chaos, built with the `chaos` tag.
# CHAOS_FLAGS adds go test flags.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
export AZURE_CCM_TOOLS_BIN="${AZURE_CCM_TOOLS_BIN:-${ROOT}/_output/tools/bin}"
export AZURE_CCM_ARTIFACTS="${AZURE_CCM_ARTIFACTS:-${ROOT}/_output/test-artifacts}"
read -r -a EXTRA <<<"${CHAOS_FLAGS:-}"
if [[ -z "$(go list -tags chaos ./test/chaos/... 2>/dev/null)" ]]; then
  echo "no chaos scenarios under test/chaos yet"
  exit 0
fi
go test -count=1 -tags chaos -timeout 60m -v "${EXTRA[@]}" ./test/chaos/...
