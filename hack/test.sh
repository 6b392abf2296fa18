#!/usr/bin/env bash
# Runs every test suite: unit, integration (test/framework, test/integration), e2e, and the
# deploy/ checks (hack/verify-deploy.sh).
# Exits non-zero if any suite fails, and prints go test's per-package summary of each.
# Tools and binaries must be in place (`make test` runs `make tools build` first).
#
# Env: GO_TEST_FLAGS adds go test flags (e.g. "-run TestX -v"); E2E_TIMEOUT (default 30m: the e2e package alone runs about 25 min on 2 cores);
# FUZZ_TIME (default 500x: 500 executions per fuzz target; `make fuzz` runs 60s each).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
GO="${GO:-go}"
OUT="${ROOT}/_output/test"
mkdir -p "${OUT}"
export AZURE_CCM_TOOLS_BIN="${AZURE_CCM_TOOLS_BIN:-${ROOT}/_output/tools/bin}"
export AZURE_CCM_ARTIFACTS="${AZURE_CCM_ARTIFACTS:-${ROOT}/_output/test-artifacts}"
read -r -a EXTRA <<<"${GO_TEST_FLAGS:-}"

# pkgs_under DIR...: the Go packages below DIRs (nothing if a dir has none yet).
pkgs_under() {
  local d
  for d in "$@"; do
    [[ -d "${d}" ]] || continue
    "${GO}" list "./${d}/..." 2>/dev/null || true
  done
}

failed=()
summary=()

# suite NAME TIMEOUT PKG...: runs go test, keeps the full log, remembers the result.
suite() {
  local name="$1" timeout="$2" start rc log="${OUT}/${1}.log"
  shift 2
  if [[ $# -eq 0 ]]; then
    summary+=("${name}: no packages")
    return 0
  fi
  echo "=== ${name}: go test $* (log: ${log})"
  start=$(date +%s)
  "${GO}" test -count=1 -timeout "${timeout}" "${EXTRA[@]}" "$@" 2>&1 | tee "${log}"
  rc=${PIPESTATUS[0]}
  summary+=("${name}: $([[ ${rc} -eq 0 ]] && echo PASS || echo "FAIL (exit ${rc})") in $(($(date +%s) - start))s")
  # go test's own per-package lines, so the summary is readable without the full log.
  grep -E '^(ok|FAIL|---|\?|panic:)' "${log}" | grep -v '^--- PASS' >"${OUT}/${name}.summary" || true
  [[ ${rc} -eq 0 ]] || failed+=("${name}")
}

mapfile -t UNIT < <(pkgs_under cmd internal)
mapfile -t INTEGRATION < <(pkgs_under test/framework test/integration)
mapfile -t E2E < <(pkgs_under test/e2e test/chaos)

suite unit 10m "${UNIT[@]}"

# Every fuzz target for a few hundred executions, about a second each once built (`make fuzz`
# runs them for a minute each); the unit suite has already run every seed corpus.
echo "=== fuzz: hack/fuzz.sh ${FUZZ_TIME:-500x} (log: ${OUT}/fuzz.log)"
start=$(date +%s)
"${ROOT}/hack/fuzz.sh" "${FUZZ_TIME:-500x}"
rc=$?
summary+=("fuzz: $([[ ${rc} -eq 0 ]] && echo PASS || echo "FAIL (exit ${rc})") in $(($(date +%s) - start))s")
[[ ${rc} -eq 0 ]] || failed+=("fuzz")

suite integration 10m "${INTEGRATION[@]}"

# Before e2e, so that TestRBAC renders the chart with the helm this installs.
# deploy/: chart, manifests, schemas, dashboard (installs helm and kubeconform on first use).
echo "=== deploy: hack/verify-deploy.sh (log: ${OUT}/deploy.log)"
start=$(date +%s)
"${ROOT}/hack/verify-deploy.sh" 2>&1 | tee "${OUT}/deploy.log"
rc=${PIPESTATUS[0]}
summary+=("deploy: $([[ ${rc} -eq 0 ]] && echo PASS || echo "FAIL (exit ${rc})") in $(($(date +%s) - start))s")
[[ ${rc} -eq 0 ]] || failed+=("deploy")

suite e2e "${E2E_TIMEOUT:-30m}" "${E2E[@]}"

echo
echo "==================== test summary ===================="
for s in "${summary[@]}"; do echo "  ${s}"; done
for f in "${OUT}"/*.summary; do
  [[ -s "${f}" ]] || continue
  echo "--- $(basename "${f}" .summary)"
  cat "${f}"
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "FAILED suites: ${failed[*]} (full logs in ${OUT}, logs of failed cluster tests in ${AZURE_CCM_ARTIFACTS})"
  exit 1
fi
echo "all suites passed"
