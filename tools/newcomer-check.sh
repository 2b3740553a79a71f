#!/usr/bin/env bash
# The README followed literally on a fresh Debian 12: debootstraps a minbase
# chroot, installs only the Debian packages that README.md's "Install and run" table
# names for each command (with --no-install-recommends, so nothing comes in
# by accident), unpacks a clean `git archive` of HEAD into it and runs the
# commands there as root, one after another. Prints each command's result
# and the tail of its output; exits 0 when every command passed.
#
#   sudo tools/newcomer-check.sh [command ...]      default: tools/run-tests.sh
#
# Environment:
#   HOCCL_NEWCOMER_CACHE   the base chroot and the downloaded .debs are kept
#                          here, so a rerun needs neither debootstrap nor
#                          downloads again  [/var/cache/hoccl-newcomer]
#   HOCCL_NEWCOMER_MIRROR  Debian mirror  [http://deb.debian.org/debian]
#   HOCCL_NEWCOMER_EXTRA   more packages to install, beyond the README's
#   HOCCL_NEWCOMER_KEEP=1  keep the chroot afterwards (its path is printed)
#
# Needs root, debootstrap, git and unshare (util-linux). /proc, /sys, /dev and
# a private /dev/shm are mounted in the chroot inside a private mount
# namespace, so nothing stays mounted when the check ends, however it ends.
# Each run starts from a fresh copy of the base chroot.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${HOCCL_NEWCOMER_CACHE:-/var/cache/hoccl-newcomer}
mirror=${HOCCL_NEWCOMER_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
say() { echo "newcomer-check: $*"; }
die() { say "$*" >&2; exit 2; }

case ${1:-} in -h|--help) sed -n '2,22s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cmds=("$@")
((${#cmds[@]})) || cmds=(tools/run-tests.sh)

# --- the packages README.md names for a command ------------------------------
# The row of the "Install and run" table that starts with | `command` |; its third
# column holds the packages, each in backquotes.
readme_packages() {
  local row
  row=$(grep -F "| \`$1\` |" "$root/README.md" | head -1) ||
    die "README.md has no row | \`$1\` | in its \"Install and run\" table: it does not say what $1 needs"
  awk -F'|' '{ print $4 }' <<<"$row" | grep -o '`[^`]*`' | tr -d '`' | tr ' ' '\n' | grep -v '^$' || true
}

pkgs=()
for c in "${cmds[@]}"; do
  mapfile -t -O "${#pkgs[@]}" pkgs < <(readme_packages "$c")
done
# shellcheck disable=SC2206
extra=(${HOCCL_NEWCOMER_EXTRA:-})
pkgs+=("${extra[@]}")
mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | awk 'NF && !seen[$0]++')

# --- what this machine needs -------------------------------------------------
(($(id -u) == 0)) || die "needs root (debootstrap, chroot, mounts); run it with sudo"
missing=()
for tool in debootstrap:debootstrap git:git unshare:util-linux chroot:coreutils; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
((${#missing[@]} == 0)) || die "missing on this machine: ${missing[*]} (apt-get install ${missing[*]})"
git -C "$root" rev-parse --verify -q HEAD >/dev/null || die "$root is not a git checkout with a commit"

mkdir -p "$cache/debs/partial" "$cache/logs"
base=$cache/base-$suite-minbase
if [[ ! -e $base/.complete ]]; then
  say "debootstrap $suite (minbase) from $mirror into $base (once; later runs reuse it)"
  rm -rf "$base"
  debootstrap --variant=minbase --cache-dir="$cache/debs" "$suite" "$base" "$mirror" >"$cache/logs/debootstrap.log" 2>&1 ||
    die "debootstrap failed; see $cache/logs/debootstrap.log"
  touch "$base/.complete"
fi

work=$(mktemp -d "$cache/chroot.XXXXXX")
cleanup() {
  if [[ ${HOCCL_NEWCOMER_KEEP:-} == 1 ]]; then say "chroot kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
cp -a "$base/." "$work/"
rm -f "$work/.complete"
cp /etc/resolv.conf "$work/etc/resolv.conf" 2>/dev/null || true
mkdir -p "$work/src"
git -C "$root" archive --format=tar HEAD | tar -x -C "$work/src"
commit=$(git -C "$root" rev-parse --short HEAD)
dirty=""
[[ -z $(git -C "$root" status --porcelain --untracked-files=no) ]] || dirty=" (uncommitted changes are NOT included)"

log=$cache/logs/newcomer-$(date +%Y%m%d-%H%M%S).log
say "commit $commit$dirty; chroot $work; log $log"
say "packages (README.md's \"Install and run\" table): ${pkgs[*]:-none}"

# The script that runs inside the chroot: apt as a newcomer would, then each
# command from the repository root, with a clean environment.
cat >"$work/newcomer-run.sh" <<'EOF'
#!/bin/bash
set -u
export DEBIAN_FRONTEND=noninteractive
pkgs=$1; shift
if [ -n "$pkgs" ]; then
  apt-get update -q || exit 100
  # shellcheck disable=SC2086
  apt-get install -y -q --no-install-recommends $pkgs || exit 100
fi
cd /src
rc=0
for c in "$@"; do
  echo "===== newcomer: $c ====="
  t0=$(date +%s)
  bash -c "$c"; r=$?
  echo "===== newcomer: $c: exit $r after $(( $(date +%s) - t0 )) s ====="
  [ $r = 0 ] || rc=$r
done
exit $rc
EOF
chmod +x "$work/newcomer-run.sh"

# Mounts live in a private mount namespace: they vanish with it.
inside() {
  local w=$1
  shift
  mount -t proc proc "$w/proc"
  mount -t sysfs sysfs "$w/sys"
  mount --rbind /dev "$w/dev"
  mount --make-rslave "$w/dev"
  mount -t tmpfs -o mode=1777,size=50% shm "$w/dev/shm"
  mount -t tmpfs -o mode=755 run "$w/run"
  mount --bind "$cache/debs" "$w/var/cache/apt/archives"
  exec chroot "$w" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 /newcomer-run.sh "$@"
}
export -f inside
export cache
t0=$(date +%s)
set +e
# No "|| true" here: with pipefail it would run and reset PIPESTATUS.
unshare --mount --propagation private bash -c 'inside "$@"' inside "$work" "${pkgs[*]}" "${cmds[@]}" 2>&1 | tee "$log" |
  grep --line-buffered -E '^(===== newcomer|Setting up|E: )'
rc=${PIPESTATUS[0]}
set -e
echo
say "last 40 lines of the output:"
tail -n 40 "$log" | sed 's/^/  | /'
echo
if ((rc == 100)); then
  say "FAILED: apt-get could not install the README's packages: ${pkgs[*]}"
elif ((rc == 0)); then
  say "PASSED: ${cmds[*]} on a fresh Debian 12 (minbase) with only: ${pkgs[*]} ($(( ($(date +%s) - t0) / 60 )) min, apt included)"
else
  say "FAILED (exit $rc): ${cmds[*]} on a fresh Debian 12 (minbase) with only: ${pkgs[*]}; full log: $log"
fi
exit "$rc"
