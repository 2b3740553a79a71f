# The Soft-RoCE guest's kernel and initramfs, from Debian packages only.
# Sourced by run.sh.
#
# prepare_kernel CACHE   downloads the kernel linux-image-amd64 points to,
#                        extracts the raw vmlinux (qemu boots it through its
#                        PVH entry, skipping the decompressor, ~4 s under TCG)
#                        and the modules the guest needs, in dependency order.
#                        Cached per kernel package. Sets KERNEL_DIR, KERNEL_PKG.
# make_initramfs OUT INIT VAR=value...
#                        busybox + those modules + INIT as /init + the
#                        variables in /etc/hoccl-guest.conf, uncompressed.

# rdma_rxe needs a crc32 crypto driver that its dependency list does not
# name ("failed to init crc32 algorithm" otherwise).
GUEST_MODULES="crc32_generic veth rdma_rxe ib_uverbs virtio_pci 9pnet_virtio 9p"

prepare_kernel() {
  local cache=$1 pkg deb tmp root ver off m
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
  if [[ -z $pkg ]]; then
    apt-get update -qq
    pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
  fi
  [[ -n $pkg ]] || { echo "softroce: apt knows no linux-image-amd64" >&2; return 1; }
  KERNEL_PKG=$pkg
  KERNEL_DIR=$cache/$pkg
  [[ -s $KERNEL_DIR/vmlinux && -s $KERNEL_DIR/modules/order ]] && return 0
  echo "softroce: building the guest kernel files from $pkg into $KERNEL_DIR"
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.build.XXXXXX")
  (cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1) || { rm -rf "$tmp"; echo "softroce: apt-get download $pkg failed" >&2; return 1; }
  deb=$(ls "$tmp"/*.deb)
  root=$tmp/root
  dpkg-deb -x "$deb" "$root"
  ver=$(ls "$root/lib/modules")
  # The bzImage's payload is an xz stream; the raw ELF inside has a PVH note.
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$root/boot/vmlinuz-$ver" | head -1 | cut -d: -f1 || true)
  [[ -n $off ]] || { echo "softroce: no xz payload in vmlinuz-$ver" >&2; rm -rf "$tmp"; return 1; }
  tail -c +$((off + 1)) "$root/boot/vmlinuz-$ver" | xz -dc --single-stream > "$tmp/vmlinux" 2>/dev/null || true
  [[ $(head -c 4 "$tmp/vmlinux" | od -An -tx1 | tr -d ' ') == 7f454c46 ]] ||
    { echo "softroce: could not extract vmlinux from vmlinuz-$ver" >&2; rm -rf "$tmp"; return 1; }
  depmod -b "$root" "$ver"
  mkdir -p "$tmp/modules"
  : > "$tmp/modules/order"
  for m in $GUEST_MODULES; do
    modprobe -d "$root" -S "$ver" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
  done | awk '!seen[$0]++' | while read -r path; do
    cp "$path" "$tmp/modules/"
    basename "$path" >> "$tmp/modules/order"
  done
  rm -rf "$KERNEL_DIR"
  mkdir -p "$KERNEL_DIR"
  mv "$tmp/vmlinux" "$tmp/modules" "$KERNEL_DIR/"
  echo "$ver" > "$KERNEL_DIR/version"
  rm -rf "$tmp"
}

make_initramfs() {
  local out=$1 init=$2 dir v
  shift 2
  dir=$(mktemp -d)
  mkdir -p "$dir"/{bin,proc,sys,dev,etc,newroot}
  cp /bin/busybox "$dir/bin/busybox"
  ln -s busybox "$dir/bin/sh"
  cp -r "$KERNEL_DIR/modules" "$dir/modules"
  install -m 755 "$init" "$dir/init"
  for v in "$@"; do echo "$v"; done > "$dir/etc/hoccl-guest.conf"
  (cd "$dir" && find . | cpio -o -H newc --quiet) > "$out"
  rm -rf "$dir"
}
