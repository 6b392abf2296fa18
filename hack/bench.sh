#!/usr/bin/env bash
# Scale benchmarks: the scenarios under test/bench, built with the `bench` tag. Their report
# goes to _output/bench. BENCH_FLAGS adds go test flags (e.g. "-run TestBurst -v").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
export AZURE_CCM_TOOLS_BIN="${AZURE_CCM_TOOLS_BIN:-${ROOT}/_output/tools/bin}"
export AZURE_CCM_BENCH_OUT="${AZURE_CCM_BENCH_OUT:-${ROOT}/_output/bench}"
mkdir -p "${AZURE_CCM_BENCH_OUT}"
read -r -a EXTRA <<<"${BENCH_FLAGS:-}"
if [[ -z "$(go list -tags bench ./test/bench/... 2>/dev/null)" ]]; then
  echo "no benchmark scenarios under test/bench yet"
  exit 0
fi
go test -count=1 -tags bench -timeout 60m -v "${EXTRA[@]}" ./test/bench/... 2>&1 | tee "${AZURE_CCM_BENCH_OUT}/bench.log"
exit "${PIPESTATUS[0]}"
