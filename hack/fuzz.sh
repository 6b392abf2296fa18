#!/usr/bin/env bash
# Runs every fuzz target (func Fuzz* in the _test.go files of cmd/ and internal/) for a while
# each: `make fuzz` (default 60s per target), and hack/test.sh for a few seconds per target.
# A failing input is kept by go test under the package's testdata/fuzz/<target>/ and reruns with
# every `go test` from then on. Prints each target's executions and new corpus entries.
#
#   hack/fuzz.sh [duration]        e.g. hack/fuzz.sh 5m; also FUZZ_TIME
#   FUZZ_RUN=FuzzIMDS hack/fuzz.sh only the targets matching that regexp
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
GO="${GO:-go}"
FUZZ_TIME="${1:-${FUZZ_TIME:-60s}}"
OUT="${ROOT}/_output/test"
mkdir -p "${OUT}"
LOG="${OUT}/fuzz.log"
SUMMARY="${OUT}/fuzz.summary"
: >"${LOG}"
: >"${SUMMARY}"

failed=()
count=0
# Directories with fuzz targets, then the targets of each.
while IFS= read -r dir; do
  pkg="./${dir}"
  while IFS= read -r target; do
    [[ -n "${target}" ]] || continue
    if [[ -n "${FUZZ_RUN:-}" && ! "${target}" =~ ${FUZZ_RUN} ]]; then
      continue
    fi
    count=$((count + 1))
    echo "=== fuzz ${pkg} ${target} (${FUZZ_TIME})" | tee -a "${LOG}"
    out="$("${GO}" test -run '^$' -fuzz "^${target}\$" -fuzztime "${FUZZ_TIME}" "${pkg}" 2>&1)"
    rc=$?
    echo "${out}" >>"${LOG}"
    # The last progress line: "fuzz: elapsed: 3s, execs: 12345 (4110/sec), new interesting: 2 (total: 9)".
    last="$(grep -E '^fuzz: elapsed:' <<<"${out}" | tail -1)"
    execs="$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"${last}")"
    interesting="$(sed -nE 's/.*new interesting: ([0-9]+ \(total: [0-9]+\)).*/\1/p' <<<"${last}")"
    if [[ ${rc} -eq 0 ]]; then
      printf '%-40s %-45s PASS %12s execs, new interesting %s\n' "${target}" "${pkg}" "${execs:-?}" "${interesting:-?}" | tee -a "${SUMMARY}"
    else
      printf '%-40s %-45s FAIL %12s execs\n' "${target}" "${pkg}" "${execs:-?}" | tee -a "${SUMMARY}"
      grep -E -- '--- FAIL|Failing input|testdata/fuzz|panic:|fuzz_test.go' <<<"${out}" | head -20
      failed+=("${target}")
    fi
  done < <(grep -h -o -E '^func (Fuzz[A-Za-z0-9_]+)\(' "${dir}"/*_test.go | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/' | sort -u)
done < <(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(' cmd internal | xargs -n1 dirname | sort -u)

echo "${count} fuzz targets, ${FUZZ_TIME} each (summary: ${SUMMARY}, log: ${LOG})"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "FAILED fuzz targets: ${failed[*]}"
  exit 1
fi
