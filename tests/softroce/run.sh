#!/usr/bin/env bash
# Runs hoccl's InfiniBand verbs transport for real: boots a Debian kernel
# under qemu (software emulation), brings up two Soft-RoCE (rxe) devices on a
# veth pair inside it and runs this build's IB tests and a 2-node x 2-rank
# all_reduce_perf over IB there (tests/softroce/guest-tests.sh). The guest
# sees the host's / read-only over virtio-9p and chroots into it, so the
# host's binaries and libraries (rdma-core included) run unchanged.
#
#   tests/softroce/run.sh [--build DIR] [--cache DIR] [--timeout SEC] [-- command ...]
#
#   --build DIR    build directory with the tests and perf programs [build]
#   --cache DIR    kernel and modules kept between runs
#                  [$HOCCL_SOFTROCE_CACHE or /var/cache/hoccl-softroce]
#   --timeout SEC  kill the guest after SEC seconds [$HOCCL_SOFTROCE_TIMEOUT or 1200]
#   --logs DIR     where the guest's logs are copied [$HOCCL_SOFTROCE_LOGS or BUILD/softroce-logs]
#   -- command     run this in the guest (in the repository, as root) instead
#                  of guest-tests.sh; e.g. -- ibv_devinfo
#
# Needs root (it installs what is missing with apt-get, and qemu's 9p export
# of / must read every file). Exit codes: the guest command's; 77 = skipped
# (not root, and not in CI by tests/ci-rule.sh's rule, where that is a
# failure); 1 = the guest did not report an exit code.
set -Eeuo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$repo/build
cache=${HOCCL_SOFTROCE_CACHE:-/var/cache/hoccl-softroce}
timeout_s=${HOCCL_SOFTROCE_TIMEOUT:-1200}
mem=${HOCCL_SOFTROCE_MEM:-4G}
logs=${HOCCL_SOFTROCE_LOGS:-}
cmd=()
while (($#)); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    --) shift; cmd=("$@"); break ;;
    -h|--help) sed -n '2,20s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
say() { echo "softroce: $*"; }
t_start=$(date +%s.%N)
elapsed() { awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# shellcheck source=../ci-rule.sh
. "$here/../ci-rule.sh"
if [[ $(id -u) != 0 ]]; then
  if hoccl_in_ci; then
    say "FAILED: needs root (qemu's 9p export of /, apt-get), and CI=$CI requires this test"; exit 1
  fi
  say "SKIPPED: needs root (qemu's 9p export of /, apt-get); run it as root to test the IB transport"
  exit 77
fi
build=$(cd "$build" && pwd)
logs=${logs:-$build/softroce-logs}
[[ -x $build/tests/test_net_ib ]] || { say "no $build/tests/test_net_ib: build hoccl first (--build DIR)"; exit 2; }

# Debian packages the guest needs on the host: qemu, busybox for the
# initramfs, kmod to resolve module dependencies, rdma-core's libraries and
# tools (the guest runs the host's), iproute2 for 'rdma link'.
pkgs="qemu-system-x86 busybox-static kmod cpio xz-utils iproute2 rdma-core ibverbs-providers ibverbs-utils"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [[ -n $missing ]]; then
  say "installing$missing"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

# shellcheck source=guest-image.sh
. "$here/guest-image.sh"
prepare_kernel "$cache"          # sets KERNEL_DIR (vmlinux, modules/)
say "kernel $KERNEL_PKG ready after $(elapsed) s"

run=$(mktemp -d /tmp/hoccl-softroce.XXXXXX)
trap 'rm -rf "$run"' EXIT
mkdir -p "$run/xchg"
chmod 777 "$run/xchg"
if ((${#cmd[@]})); then
  guest_cmd=$(printf '%q ' "${cmd[@]}")
else
  guest_cmd="tests/softroce/guest-tests.sh '$build'"
fi
make_initramfs "$run/initrd.cpio" "$here/guest-init.sh" \
  "GUEST_BUILD='$build'" "GUEST_REPO='$repo'" "GUEST_CMD=\"$guest_cmd\""

# TCG: the paravirtual KVM of these machines cannot run a stock kernel (see
# the README). qemu64 is the fastest CPU model under TCG; no NIC: nothing
# leaves the guest.
say "booting the guest (qemu TCG, $mem, timeout ${timeout_s} s)"
t_boot=$(date +%s.%N)
set +e
timeout --foreground -k 10 "$timeout_s" qemu-system-x86_64 \
  -accel tcg -cpu qemu64 -smp 4 -m "$mem" -nographic -nic none -no-reboot \
  -kernel "$KERNEL_DIR/vmlinux" -initrd "$run/initrd.cpio" \
  -append "console=ttyS0 panic=-1 quiet loglevel=3 rdinit=/init" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$build",mount_tag=build,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$repo",mount_tag=repo,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$run/xchg",mount_tag=xchg,security_model=none </dev/null
qemu_rc=$?
set -e
rm -rf "$logs"
mkdir -p "$logs"
cp -r "$run/xchg/." "$logs/" 2>/dev/null || true
guest_s=$(awk -v a="$t_boot" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if ((qemu_rc == 124 || qemu_rc == 137)); then
  say "FAILED: the guest ran past ${timeout_s} s and was killed"; exit 1
fi
if [[ ! -s $run/xchg/rc ]]; then
  say "FAILED: the guest exited (qemu status $qemu_rc) without reporting an exit code"; exit 1
fi
rc=$(cat "$run/xchg/rc")
say "guest command exit code $rc; qemu ran ${guest_s} s; total $(elapsed) s; logs in $logs"
exit "$rc"
