#!/usr/bin/env bash
# Runs every fuzz target (func Fuzz* in the _test.go files of cmd/ and internal/) with a budget
# each: `make fuzz` (default 60s per target) and hack/test.sh (a few hundred executions per
# target). The budget is go test's -fuzztime: a duration ("60s") or a number of executions
# ("500x"). Every `go test` also runs each target's seed corpus as an ordinary test.
#
# Each package's fuzz-instrumented test binary is built once (go test -c -fuzz) and run once per
# target, from the package directory and with go test's corpus cache, as `go test -fuzz` would.
# A failing input is kept under the package's testdata/fuzz/<target>/ and reruns with every
# `go test` from then on. Prints each target's executions and new corpus entries.
#
# Go 1.26's fuzz coordinator can end a duration budget with a bare "context deadline exceeded"
# failure and no failing input (go.dev/issue/75804, fixed in Go 1.27): such a run is reported
# as "PASS (deadline race)" with its executions; any run that wrote a failing input, panicked or
# failed otherwise fails. Execution budgets have no deadline and never meet it.
#
#   hack/fuzz.sh [budget]          e.g. hack/fuzz.sh 5m, hack/fuzz.sh 500x; also FUZZ_TIME
#   FUZZ_RUN=FuzzIMDS hack/fuzz.sh only the targets matching that regexp
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
GO="${GO:-go}"
FUZZ_TIME="${1:-${FUZZ_TIME:-60s}}"
OUT="${ROOT}/_output/test"
BIN="${ROOT}/_output/fuzz"
mkdir -p "${OUT}" "${BIN}"
LOG="${OUT}/fuzz.log"
SUMMARY="${OUT}/fuzz.summary"
: >"${LOG}"
: >"${SUMMARY}"
FUZZ_CACHE="$("${GO}" env GOCACHE)/fuzz"
# go test's default timeout, plus the budget when it is a duration.
TIMEOUT=10m
if [[ "${FUZZ_TIME}" =~ ^[0-9]+(s|m|h)$ ]]; then
  TIMEOUT="$(( $(sed -E 's/s$//; s/m$/*60/; s/h$/*3600/' <<<"${FUZZ_TIME}") + 600 ))s"
fi

failed=()
count=0
start=$(date +%s)
# Directories with fuzz targets, then the targets of each.
while IFS= read -r dir; do
  pkg="./${dir}"
  mapfile -t targets < <(grep -h -o -E '^func (Fuzz[A-Za-z0-9_]+)\(' "${dir}"/*_test.go | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/' | sort -u)
  selected=()
  for target in "${targets[@]}"; do
    if [[ -n "${FUZZ_RUN:-}" && ! "${target}" =~ ${FUZZ_RUN} ]]; then
      continue
    fi
    selected+=("${target}")
  done
  [[ ${#selected[@]} -gt 0 ]] || continue
  importpath="$("${GO}" list -f '{{.ImportPath}}' "${pkg}")"
  bin="${BIN}/$(tr '/' '_' <<<"${dir}").test"
  echo "=== build ${pkg} (fuzz-instrumented)" | tee -a "${LOG}"
  if ! out="$("${GO}" test -c -fuzz=. -o "${bin}" "${pkg}" 2>&1)"; then
    echo "${out}" | tee -a "${LOG}"
    for target in "${selected[@]}"; do
      printf '%-40s %-45s FAIL %12s (build)\n' "${target}" "${pkg}" "-" | tee -a "${SUMMARY}"
      failed+=("${target}")
    done
    continue
  fi
  for target in "${selected[@]}"; do
    count=$((count + 1))
    echo "=== fuzz ${pkg} ${target} (${FUZZ_TIME})" | tee -a "${LOG}"
    corpus_before="$(ls "${dir}/testdata/fuzz/${target}" 2>/dev/null | wc -l)"
    out="$(cd "${dir}" && "${bin}" -test.run='^$' -test.fuzz="^${target}\$" -test.fuzztime="${FUZZ_TIME}" \
      -test.fuzzcachedir="${FUZZ_CACHE}/${importpath}" -test.timeout="${TIMEOUT}" -test.paniconexit0 2>&1)"
    rc=$?
    echo "${out}" >>"${LOG}"
    corpus_after="$(ls "${dir}/testdata/fuzz/${target}" 2>/dev/null | wc -l)"
    # The last progress line: "fuzz: elapsed: 3s, execs: 12345 (4110/sec), new interesting: 2 (total: 9)".
    last="$(grep -E '^fuzz: elapsed:' <<<"${out}" | tail -1)"
    execs="$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"${last}")"
    interesting="$(sed -nE 's/.*new interesting: ([0-9]+ \(total: [0-9]+\)).*/\1/p' <<<"${last}")"
    result=PASS
    if [[ ${rc} -ne 0 ]]; then
      result=FAIL
      # The coordinator's deadline race: the only failure line is the deadline, nothing written.
      if [[ "${corpus_after}" == "${corpus_before}" ]] && grep -q '^    context deadline exceeded$' <<<"${out}" &&
        ! grep -qE 'Failing input written|panic:|fuzz_test.go:[0-9]+:' <<<"${out}"; then
        result="PASS (deadline race)"
      fi
    fi
    if [[ "${result}" != FAIL ]]; then
      printf '%-40s %-45s %s %12s execs, new interesting %s\n' "${target}" "${pkg}" "${result}" "${execs:-?}" "${interesting:-?}" | tee -a "${SUMMARY}"
    else
      printf '%-40s %-45s FAIL %12s execs\n' "${target}" "${pkg}" "${execs:-?}" | tee -a "${SUMMARY}"
      grep -E -- '--- FAIL|Failing input|testdata/fuzz|panic:|fuzz_test.go|deadline' <<<"${out}" | head -20
      failed+=("${target}")
    fi
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(' cmd internal | xargs -n1 dirname | sort -u)

echo "${count} fuzz targets, ${FUZZ_TIME} each, in $(($(date +%s) - start))s (summary: ${SUMMARY}, log: ${LOG})"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "FAILED fuzz targets: ${failed[*]}"
  exit 1
fi
