#!/usr/bin/env bash
# Runs `make test` N times (default 3) under an artificial CPU load on every core, to find tests
# that fail only on a busy machine. Records pass/fail and duration of each run and prints a
# summary with the tests that failed. Exit status: 0 if every run passed.
#
#   hack/stress-test.sh [N]
#
# The load: one CPU hog pinned to each core (taskset), stress-ng's cpu stressor when it is on
# PATH (Debian package stress-ng), else a shell busy loop. It runs at normal priority, like the
# other work of a shared machine.
#
# Env:
#   STRESS_CPUS  cores to load (default: all, nproc)
#   STRESS_LOAD  percent of each core the hog takes, 1-100 (default 100; below 100 needs stress-ng)
#   STRESS_CMD   the command of one run (default "make test")
#   STRESS_OUT   where logs go (default _output/stress/<date>)
# On a shared machine take the heavy-run lock: flock /tmp/azure-ccm-heavy.lock hack/stress-test.sh 3
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
RUNS="${1:-3}"
CPUS="${STRESS_CPUS:-$(nproc)}"
LOAD="${STRESS_LOAD:-100}"
CMD="${STRESS_CMD:-make test}"
OUT="${STRESS_OUT:-${ROOT}/_output/stress/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "${OUT}"

if ! [[ "${RUNS}" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 [runs]  (runs: a positive number, got '${RUNS}')" >&2
  exit 2
fi
if ! [[ "${LOAD}" =~ ^[0-9]+$ ]] || ((LOAD < 1 || LOAD > 100)); then
  echo "STRESS_LOAD must be 1-100, got '${LOAD}'" >&2
  exit 2
fi
if ! command -v taskset >/dev/null; then
  echo "taskset (util-linux) is needed to pin the load to each core" >&2
  exit 2
fi
HAVE_STRESS_NG=false
command -v stress-ng >/dev/null && HAVE_STRESS_NG=true
if ((LOAD < 100)) && ! ${HAVE_STRESS_NG}; then
  echo "STRESS_LOAD=${LOAD} needs stress-ng (apt-get install stress-ng); the busy loop loads a core fully" >&2
  exit 2
fi

hogs=()
stop_load() {
  local p
  for p in "${hogs[@]}"; do
    kill "${p}" 2>/dev/null || true
  done
  for p in "${hogs[@]}"; do
    wait "${p}" 2>/dev/null || true
  done
  hogs=()
}
trap stop_load EXIT
trap 'stop_load; exit 130' INT TERM

start_load() {
  local cpu
  for ((cpu = 0; cpu < CPUS; cpu++)); do
    if ${HAVE_STRESS_NG}; then
      taskset -c "${cpu}" stress-ng --cpu 1 --cpu-load "${LOAD}" --timeout 0 --quiet &
    else
      taskset -c "${cpu}" bash -c 'while :; do :; done' &
    fi
    hogs+=("$!")
  done
}

generator="busy loop"
${HAVE_STRESS_NG} && generator="stress-ng --cpu 1 --cpu-load ${LOAD}"
echo "stress test: ${RUNS} run(s) of '${CMD}' with ${generator} pinned to each of ${CPUS} core(s); logs in ${OUT}"

results=()
passed=0
for ((i = 1; i <= RUNS; i++)); do
  log="${OUT}/run-${i}.log"
  start_load
  began=$(date +%s)
  echo "=== run ${i}/${RUNS} started $(date -u +%H:%M:%SZ) (log: ${log})"
  bash -c "${CMD}" >"${log}" 2>&1
  rc=$?
  secs=$(($(date +%s) - began))
  stop_load
  # The failed tests, as go test reports them, and the suite lines of hack/test.sh's summary.
  fails=$(grep -E '^\s*--- FAIL: ' "${log}" | sed -E 's/^\s*--- FAIL: ([^ ]+).*/\1/' | sort -u | tr '\n' ' ')
  suites=$(sed -n '/=== test summary ===/,$p' "${log}" | grep -E '^  [a-z0-9-]+: ' | sed 's/^  //' | tr '\n' ';')
  if [[ -d "${ROOT}/_output/test" ]]; then
    mkdir -p "${OUT}/run-${i}"
    cp "${ROOT}"/_output/test/*.log "${ROOT}"/_output/test/*.summary "${OUT}/run-${i}/" 2>/dev/null || true
  fi
  if [[ ${rc} -eq 0 ]]; then
    passed=$((passed + 1))
    results+=("run ${i}: PASS in ${secs}s  [${suites}]")
  else
    results+=("run ${i}: FAIL (exit ${rc}) in ${secs}s  [${suites}]  failed: ${fails:-see ${log}}")
  fi
  echo "${results[-1]}"
done

echo
echo "==================== stress test summary ===================="
echo "command: ${CMD}; load: ${generator} on ${CPUS} core(s); machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
for r in "${results[@]}"; do echo "  ${r}"; done
echo "passed ${passed} of ${RUNS}"
[[ ${passed} -eq ${RUNS} ]]
