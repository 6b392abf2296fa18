#!/usr/bin/env bash
# Runs every stage of `make test`: lint (hack/lint.sh), unit (`cmd`, `internal`) with the race
# detector, the fuzz sweep, integration (test/framework, test/integration) with the race
# detector, the deploy/ checks (hack/verify-deploy.sh), the container images (built by
# hack/images, run in podman by test/images), and the end-to-end suites (test/e2e,
# test/chaos) against race-detector builds of the binaries (a data race reported by the CCM,
# the node manager or the disk provisioner fails the test that ran it).
# Exits non-zero if any stage fails, and prints go test's per-package summary of each.
# Tools and binaries must be in place (`make test` runs `make tools build` first).
#
# Env: GO_TEST_FLAGS adds go test flags (e.g. "-run TestX -v"); RACE=0 runs everything
# without the race detector; E2E_TIMEOUT (default 40m); FUZZ_TIME (default 500x: 500
# executions per fuzz target; `make fuzz` runs 60s each); STAGES (default "lint unit fuzz
# integration deploy images e2e") runs only the stages named.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
GO="${GO:-go}"
OUT="${ROOT}/_output/test"
mkdir -p "${OUT}"
rm -f "${OUT}"/*.summary "${OUT}"/*.slowest
export AZURE_CCM_TOOLS_BIN="${AZURE_CCM_TOOLS_BIN:-${ROOT}/_output/tools/bin}"
export AZURE_CCM_ARTIFACTS="${AZURE_CCM_ARTIFACTS:-${ROOT}/_output/test-artifacts}"
read -r -a EXTRA <<<"${GO_TEST_FLAGS:-}"
RACE_FLAG=()
[[ "${RACE:-1}" == "0" ]] || RACE_FLAG=(-race)
STAGES=" ${STAGES:-lint unit fuzz integration deploy images e2e} "
want() { [[ "${STAGES}" == *" $1 "* ]]; }

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
  # -v keeps every test's log and duration in the log file; the console gets the result lines
  # only (a failing test's output is in the log, and in its artifacts for cluster tests).
  "${GO}" test -v -count=1 -timeout "${timeout}" "${RACE_FLAG[@]}" "${EXTRA[@]}" "$@" 2>&1 |
    tee "${log}" | grep --line-buffered -E '^(ok|FAIL|--- FAIL|--- SKIP|panic:|\?)|WARNING: DATA RACE|^# '
  rc=${PIPESTATUS[0]}
  summary+=("${name}: $([[ ${rc} -eq 0 ]] && echo PASS || echo "FAIL (exit ${rc})") in $(($(date +%s) - start))s")
  # go test's own per-package lines, so the summary is readable without the full log.
  grep -E '^(ok|FAIL|--- FAIL|\?|panic:)' "${log}" >"${OUT}/${name}.summary" || true
  # A package that did not build says why under its "# pkg" line; keep that too.
  awk '/^# /{b=1; n=0} /^(ok|FAIL|=== |--- )/{b=0} b && n++ < 10' "${log}" >>"${OUT}/${name}.summary" || true
  # A failing test's last log lines (its t.Error and t.Log lines, file:line first): the CI shows
  # the summary only, and the cluster artifacts may be gone by the time someone looks.
  awk '
    /^=== RUN   Test[^\/]*$/ { n = 0 }
    /^[ \t]+[^ \t]+\.go:[0-9]+: / { buf[n++ % 15] = substr($0, 1, 400); next }
    /^--- FAIL: Test/ && shown < 3 {
      print "last log lines of " $3 ":"
      for (i = (n > 15 ? n - 15 : 0); i < n; i++) print "  " buf[i % 15]
      shown++; n = 0
    }' "${log}" >>"${OUT}/${name}.summary" || true
  # Where the suite's time went: its slowest top-level tests.
  grep -E '^--- (PASS|FAIL): Test[^ ]* \([0-9.]+s\)' "${log}" |
    sed -E 's/^--- [A-Z]+: ([^ ]+) \(([0-9.]+)s\)/\2 \1/' | sort -rn | head -15 >"${OUT}/${name}.slowest" || true
  if [[ "${name}" == e2e && -s "${OUT}/${name}.slowest" ]]; then
    # The working e2e tests take turns, two at a time, in go test's parallel phase (test/e2e/doc.go).
    echo "(a working e2e test's time includes its wait for its turn; its log says how long)" >>"${OUT}/${name}.slowest"
  fi
  [[ ${rc} -eq 0 ]] || failed+=("${name}")
}

# stage NAME CMD...: runs a stage that is not a go test suite, keeps its output (NAME.out: the
# fuzz sweep writes its own NAME.log and NAME.summary), remembers the result.
stage() {
  local name="$1" start rc log="${OUT}/${1}.out"
  shift
  echo "=== ${name}: $* (log: ${log})"
  start=$(date +%s)
  "$@" 2>&1 | tee "${log}"
  rc=${PIPESTATUS[0]}
  summary+=("${name}: $([[ ${rc} -eq 0 ]] && echo PASS || echo "FAIL (exit ${rc})") in $(($(date +%s) - start))s")
  [[ ${rc} -eq 0 ]] && return 0
  failed+=("${name}")
  # The CI shows the summary only: keep the failing stage's last findings there, unless the
  # stage wrote its own summary (the fuzz sweep does).
  if [[ ! -s "${OUT}/${name}.summary" ]]; then
    grep -vE '^    \(' "${log}" | tail -n 40 >"${OUT}/${name}.summary" || true
  fi
}

mapfile -t UNIT < <(pkgs_under cmd internal)
mapfile -t INTEGRATION < <(pkgs_under test/framework test/integration)
mapfile -t E2E < <(pkgs_under test/e2e test/chaos)

# gofmt, golangci-lint or go vet under every build configuration
# (bench and chaos included: nothing else in `make test` compiles them).
want lint && stage lint "${ROOT}/hack/lint.sh"

want unit && suite unit 20m "${UNIT[@]}"

# Every fuzz target for a few hundred executions, about a second each once built (`make fuzz`
# runs them for a minute each); the unit suite has already run every seed corpus.
want fuzz && stage fuzz "${ROOT}/hack/fuzz.sh" "${FUZZ_TIME:-500x}"

want integration && suite integration 10m "${INTEGRATION[@]}"

# Before e2e, so that TestRBAC renders the chart with the helm this installs.
# deploy/: chart, manifests, schemas, dashboard (installs helm and kubeconform on first use).
want deploy && stage deploy "${ROOT}/hack/verify-deploy.sh"

# The images: built (hack/images: static binaries, compiled from scratch on the first run), then
# run in podman as the chart runs them (test/images). Only the host's platform: the tests can run
# nothing else, and the second architecture doubled the stage's compile on a cold machine;
# `make images` builds linux/amd64 and linux/arm64 (PLATFORMS overrides either). Installs podman
# and runc from Debian when missing; a missing runtime fails the suite.
if want images; then
  export PLATFORMS="${PLATFORMS:-linux/$("${GO}" env GOARCH)}"
  # hack/images itself is compiled with make build's flags, so that its dependencies come from
  # the build cache the lint stage filled (with cgo on they would be compiled again).
  stage images-build bash -c '"$1"/hack/install-podman.sh && CGO_ENABLED=0 GOFLAGS=-trimpath "$2" run ./hack/images' _ "${ROOT}" "${GO}" &&
    suite images 15m -tags images ./test/images/...
fi

if want e2e; then
  # The end-to-end suites run the binaries built with the race detector: the packages are
  # already compiled that way for the unit suite, and the CCM's concurrency (writers,
  # batches, pass queues) is exercised hardest against a real cluster.
  if [[ ${#RACE_FLAG[@]} -gt 0 ]]; then
    RACE_BIN="${ROOT}/_output/bin-race"
    mkdir -p "${RACE_BIN}"
    echo "=== build: go build -race -tags testhooks -o ${RACE_BIN}/ ./cmd/..."
    if "${GO}" build -race -tags testhooks -o "${RACE_BIN}/" ./cmd/...; then
      export AZURE_CCM_BIN_DIR="${RACE_BIN}"
    else
      failed+=("build-race")
    fi
  fi
  # -parallel: every e2e test starts at once; the working ones then take turns, two at a time
  # (test/e2e/doc.go).
  suite e2e "${E2E_TIMEOUT:-40m}" -parallel 64 "${E2E[@]}"
fi

echo
echo "==================== test summary ===================="
# A full disk makes compiles fail as "[build failed]" far from the cause; say it plainly.
if grep -qs 'no space left on device' "${OUT}"/*.log "${OUT}"/*.out; then
  echo "  NOTE: 'no space left on device' in the logs: free disk (e.g. go clean -cache) and rerun"
  df -h "${ROOT}" "$("${GO}" env GOCACHE)" "${TMPDIR:-/tmp}" 2>/dev/null | sed 's/^/  /'
fi
for s in "${summary[@]}"; do echo "  ${s}"; done
for f in "${OUT}"/*.summary; do
  [[ -s "${f}" ]] || continue
  echo "--- $(basename "${f}" .summary)"
  cat "${f}"
done
for f in "${OUT}"/*.slowest; do
  [[ -s "${f}" ]] || continue
  echo "--- slowest tests of $(basename "${f}" .slowest) (seconds)"
  cat "${f}"
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "FAILED suites: ${failed[*]} (full logs in ${OUT}, logs of failed cluster tests in ${AZURE_CCM_ARTIFACTS})"
  exit 1
fi
echo "all suites passed"
