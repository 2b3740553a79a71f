#!/usr/bin/env bash
# Builds and tests hoccl on Debian 13 (trixie): GCC 14, CMake 3.31, its
# hwloc, verbs, GoogleTest and Google Benchmark, and PyTorch 2.x
# (python3-torch, libtorch-dev), in a chroot made once with debootstrap and
# kept (default /var/cache/hoccl-torch2/trixie; HOCCL_TRIXIE_ROOT moves it).
# The working tree (tracked and untracked files git does not ignore) is
# copied in, so what is checked is what you have, committed or not.
#
#   tools/torch2-check.sh            the README's test command (tools/run-tests.sh), the whole suite,
#                                    the torch backend's under torch 2.x included
#   tools/torch2-check.sh --torch    only hoccl, the backend and the torch tests (ctest -R torch_)
#   tools/torch2-check.sh --run CMD  builds as --torch, then runs CMD (bash) in the copied tree there
#                                    (e.g. the benchmarks under torch 2.x)
#   tools/torch2-check.sh --shell    a shell in the chroot, in the copied tree
#
# Needs root (chroot, mounts) and Debian's archive. The CUDA Toolkit is not
# in the chroot, so the kernels are not built there (the Debian 12 build
# checks them). Debian's torch is built without libuv: its TCPStore needs
# USE_LIBUV=0, which this sets.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
chroot_dir=${HOCCL_TRIXIE_ROOT:-/var/cache/hoccl-torch2/trixie}
mode=${1:-all}
case $mode in all | --torch | --shell | --run) ;; *) echo "usage: tools/torch2-check.sh [--torch|--run CMD|--shell]" >&2; exit 2 ;; esac
run_cmd=${2:-}
[ "$mode" != --run ] || [ -n "$run_cmd" ] || { echo "torch2-check: --run needs a command" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "torch2-check: needs root (debootstrap, chroot, mounts)" >&2; exit 1; }

pkgs="build-essential cmake pkg-config ccache git python3 python3-setuptools python3-torch libtorch-dev pybind11-dev python3-pytest
      nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libibverbs-dev libhwloc-dev
      iproute2 util-linux procps valgrind python3-matplotlib"

if [ ! -e "$chroot_dir/etc/debian_version" ] || ! grep -q '^13' "$chroot_dir/etc/debian_version"; then
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
  echo "torch2-check: making a Debian 13 chroot in $chroot_dir (once; several minutes)"
  mkdir -p "$chroot_dir"
  debootstrap --variant=minbase trixie "$chroot_dir" http://deb.debian.org/debian >/dev/null
fi

# Mounts the tests need: /proc, /sys, /dev (shared memory, /dev/null), /run
# (network namespaces) and the design folder beside the tree, as in CI;
# undone on exit.
mounted=()
# bind TARGET MOUNT-ARGS...: mounts MOUNT-ARGS on the chroot's TARGET (rbinds
# made slaves, so that nothing done inside reaches the host's mounts).
bind() {
  local target=$chroot_dir$1
  shift
  mkdir -p "$target"
  mountpoint -q "$target" && return
  mount "$@" "$target"
  mounted+=("$target")
  case " $* " in *" --rbind "*) mount --make-rslave "$target" ;; esac
}
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
# The chroot's root a mount point of its own, as / is: the emulated
# cluster's namespaces (tests/cluster) remount it.
bind "" --bind "$chroot_dir"
bind /proc -t proc proc
bind /sys --rbind /sys
bind /dev --rbind /dev
bind /run --bind /run
[ -d "$root/../shared" ] && bind /work/shared --bind "$root/../shared"
cp /etc/resolv.conf "$chroot_dir/etc/resolv.conf" 2>/dev/null || true

missing=$(chroot "$chroot_dir" bash -c "for p in $(echo $pkgs); do dpkg -s \$p >/dev/null 2>&1 || echo \$p; done")
if [ -n "$missing" ]; then
  echo "torch2-check: installing in the chroot:" $missing
  chroot "$chroot_dir" bash -c "export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq $(echo $missing) >/dev/null"
fi

# The tree, as git sees it (no build folders), at /work/main beside /work/shared.
src=/work/main
mkdir -p "$chroot_dir$src"
find "$chroot_dir$src" -mindepth 1 -maxdepth 1 ! -name build-trixie -exec rm -rf {} +
(cd "$root" && git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf -) |
  tar -C "$chroot_dir$src" -xf -
torch=$(chroot "$chroot_dir" python3 -c 'import torch; print(torch.__version__)')
gcc=$(chroot "$chroot_dir" gcc -dumpfullversion)
echo "torch2-check: Debian $(cat "$chroot_dir/etc/debian_version"), GCC $gcc, torch $torch"

env="export USE_LIBUV=0 CCACHE_DIR=/var/cache/ccache HOCCL_CMAKE_ARGS='-DHOCCL_BUILD_TORCH=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DHOCCL_DEBUG_INFO=lines'; cd $src"
case $mode in
  --shell) chroot "$chroot_dir" bash -c "$env; exec bash -i" ;;
  --torch | --run)
    build="eval cmake -S . -B build-trixie -DCMAKE_BUILD_TYPE=RelWithDebInfo \$HOCCL_CMAKE_ARGS >/dev/null
      cmake --build build-trixie -j \$(nproc) --target hoccl hoccl_torch_C hoccl_torch_py hoccl-paro"
    if [ "$mode" = --run ]; then
      chroot "$chroot_dir" bash -c "$env; set -e; $build >/dev/null; export PYTHONPATH=$src/build-trixie/bindings/torch/python; $run_cmd"
    else
      chroot "$chroot_dir" bash -c "$env; set -e; $build; ctest --test-dir build-trixie --output-on-failure -R torch_"
      echo "torch2-check: the torch tests passed under torch $torch (GCC $gcc)"
    fi
    ;;
  all)
    chroot "$chroot_dir" bash -c "$env; tools/run-tests.sh build-trixie"
    echo "torch2-check: the README's test command passed on Debian 13 (GCC $gcc, torch $torch)"
    ;;
esac
