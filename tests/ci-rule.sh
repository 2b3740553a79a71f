# The project's one rule for "running in CI", sourced by every test script
# that can skip (tests/cluster, tests/softroce):
#
#   CI is set, not empty, and not 0, false, no or off (any case)
#     => a test that cannot run here is a FAILURE, not a skip (exit 1, not 77).
#
# CI services set CI=true; .ci/run sets it when it is unset. The C++ checks
# that skip for the same reason (tests/plugin/real_nccl_check.cc) apply the
# same test.

# Returns 0 (true) when the rule above says we are running in CI.
hoccl_in_ci() {
  local v=${CI:-}
  v=${v,,}
  [[ -n $v && $v != 0 && $v != false && $v != no && $v != off ]]
}
