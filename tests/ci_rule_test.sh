#!/usr/bin/env bash
# Checks tests/ci-rule.sh (the one rule for "running in CI") and that every
# script that can skip for want of root or namespaces uses it, not its own.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/ci-rule.sh"
fail=0
check() {  # check VALUE|unset EXPECTED(ci|local)
  local got
  if [[ $1 == unset ]]; then got=$(unset CI; hoccl_in_ci && echo ci || echo local)
  else got=$(CI=$1 hoccl_in_ci && echo ci || echo local); fi
  if [[ $got != "$2" ]]; then echo "FAIL: CI=$1 gives $got, want $2"; fail=1; fi
}
check unset local
for v in "" 0 false FALSE no No off OFF; do check "$v" local; done
for v in true 1 yes TRUE on github anything; do check "$v" ci; done
for f in cluster/lib.sh softroce/run.sh; do
  grep -q 'ci-rule.sh' "$here/$f" || { echo "FAIL: tests/$f does not source ci-rule.sh"; fail=1; }
  # No second, private reading of $CI.
  if grep -nE '\$\{?CI(\b|[:}])' "$here/$f" | grep -v 'CI=%s\|CI=\$CI\|"\$CI"' | grep -q .; then
    echo "FAIL: tests/$f reads \$CI itself:"; grep -nE '\$\{?CI(\b|[:}])' "$here/$f"; fail=1
  fi
done
((fail == 0)) && echo "ci rule: ok"
exit $fail
