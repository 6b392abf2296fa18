#!/usr/bin/env bash
# Scale benchmarks: the scenarios under test/bench, built with the `bench` tag. Each scenario
# writes its JSON result to docs/performance/results (AZURE_CCM_PERF_RESULTS overrides it), then
# docs/performance/README.md and its plots are generated from every result there. The go test
# log goes to _output/bench/bench.log. BENCH_FLAGS adds go test flags (e.g. "-run TestBurst");
# BENCH_* variables shrink scenarios for quick runs (the result then says it was reduced).
#
# Scenarios (go test -run name → result; size variables):
#   TestLoadBalancerBurst    → lb-burst (three variants of equal size: ours, 50 workers without merging,
#                              1 worker without merging), steady-state; BENCH_NODES, BENCH_SERVICES, BENCH_STEADY_SECONDS
#   TestLoadBalancerBurstNICPools → lb-burst-nic-pools (the same burst with NIC-based pools and default flags,
#                              requests against the computed minimum); BENCH_NODES, BENCH_SERVICES
#   TestScaleSetScaling      → scale-set-scaling; BENCH_SCALE_*
#   TestRollingUpgrade       → rolling-upgrade; BENCH_ROLL_*
#   TestAdminStateBench      → adminstate
#   TestThrottling, TestThrottlingScaledLimits → throttling, throttling-gate; BENCH_THROTTLE_*, BENCH_GATE_*
#   TestLargeCluster         → large-cluster; BENCH_LARGE_* (BENCH_LARGE_GOMEMLIMIT: the CCM's GOMEMLIMIT);
#                              BENCH_LARGE_NODES=10000 BENCH_LARGE_SERVICES=2000 → large-cluster-10000, over
#                              3 load balancer configurations (Azure's pool and frontend limits; BENCH_LARGE_LBS)
#   TestMultiSLBScale        → multislb-scale (1,000 services over 4 load balancers on 100 nodes);
#                              BENCH_MSLB_SERVICES, BENCH_MSLB_NODES, BENCH_MSLB_LBS, BENCH_MSLB_BUDGET_SECONDS
#   TestLocalChurn           → local-churn (50 Local services on 100 nodes, 3 minutes of pod churn);
#                              BENCH_LOCAL_SERVICES, BENCH_LOCAL_NODES, BENCH_LOCAL_CHURN_SECONDS,
#                              BENCH_LOCAL_INTERVAL (pool update interval, s), BENCH_LOCAL_OPS_PER_SECOND, BENCH_LOCAL_SEED
#   TestAzsimBench           → azsim
#   TestPrivateLinkBurst     → pls-burst (50 internal services with a private link service, at once);
#                              BENCH_PLS_SERVICES, BENCH_PLS_NODES, BENCH_PLS_BUDGET_SECONDS
#   (and the migration and service gateway scenarios of test/bench)
# e.g. BENCH_MSLB_SERVICES=100 BENCH_MSLB_NODES=20 make bench BENCH_FLAGS='-run ^TestMultiSLBScale$'
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
export AZURE_CCM_TOOLS_BIN="${AZURE_CCM_TOOLS_BIN:-${ROOT}/_output/tools/bin}"
export AZURE_CCM_BENCH_OUT="${AZURE_CCM_BENCH_OUT:-${ROOT}/_output/bench}"
export AZURE_CCM_PERF_RESULTS="${AZURE_CCM_PERF_RESULTS:-${ROOT}/docs/performance/results}"
mkdir -p "${AZURE_CCM_BENCH_OUT}" "${AZURE_CCM_PERF_RESULTS}"
read -r -a EXTRA <<<"${BENCH_FLAGS:-}"
# The scenarios share a 2-core machine with their own cluster: one at a time (-p 1, no -parallel).
set +e
go test -count=1 -p 1 -tags bench -timeout 180m -v "${EXTRA[@]}" ./test/bench/... 2>&1 | tee "${AZURE_CCM_BENCH_OUT}/bench.log"
rc="${PIPESTATUS[0]}"
set -e
# The plots' library lives in its own module (test/bench/perfreport), not in the product's.
(cd "${ROOT}/test/bench/perfreport" && go run . -results "${AZURE_CCM_PERF_RESULTS}" -out "${ROOT}/docs/performance")
exit "${rc}"
