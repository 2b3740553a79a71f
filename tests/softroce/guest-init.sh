#!/bin/sh
# /init of the Soft-RoCE guest (busybox sh, PID 1). Loads the modules the
# initramfs carries, mounts the host's root (read-only) and the directories
# run.sh shares over virtio-9p, chroots into the host's userland, brings up
# two rxe devices on a veth pair and runs the command run.sh put in
# /etc/hoccl-guest.conf. The command's exit code goes back through the
# exchange directory; then the guest powers off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
. /etc/hoccl-guest.conf   # GUEST_BUILD, GUEST_REPO, GUEST_CMD

say() { echo "guest: $*"; }
finish() {
  echo "$1" > /newroot/run/hoccl-xchg/rc 2>/dev/null
  sync
  poweroff -f
}
for m in $(cat /modules/order); do
  insmod "/modules/$m" || say "insmod $m failed"
done

# 9p: the host's / read-only; the build and the repository at their own
# paths (the build directory is often under the host's /tmp, which the
# tmpfs below hides); an exchange directory for the exit code and logs.
opts=trans=virtio,version=9p2000.L,msize=512000
mkdir -p /newroot
mount -t 9p -o "$opts,ro,cache=loose" hostroot /newroot || { say "cannot mount the host root"; poweroff -f; }
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
mkdir -p /newroot/dev/shm /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts
for d in /tmp /run /var/tmp; do mount -t tmpfs -o mode=1777 tmpfs "/newroot$d"; done
mkdir -p "/newroot$GUEST_BUILD" "/newroot$GUEST_REPO" /newroot/run/hoccl-xchg 2>/dev/null
mount -t 9p -o "$opts,ro,cache=loose" build "/newroot$GUEST_BUILD" || { say "cannot mount the build"; poweroff -f; }
mount -t 9p -o "$opts,ro,cache=loose" repo "/newroot$GUEST_REPO" || { say "cannot mount the repository"; poweroff -f; }
mount -t 9p -o "$opts" xchg /newroot/run/hoccl-xchg || { say "cannot mount the exchange directory"; poweroff -f; }

# Two rxe devices on a veth pair. accept_dad=0: duplicate-address detection
# would delay the link-local GIDs and time out the first QP connections.
in_root() { chroot /newroot /usr/bin/env PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
in_root ip link set lo up
in_root ip link add veth0 type veth peer name veth1
for v in veth0 veth1; do
  echo 0 > "/proc/sys/net/ipv6/conf/$v/accept_dad"
  in_root ip link set "$v" mtu 9000 up
done
in_root rdma link add rxe0 type rxe netdev veth0 || say "rdma link add rxe0 failed"
in_root rdma link add rxe1 type rxe netdev veth1 || say "rdma link add rxe1 failed"
zero=0000:0000:0000:0000:0000:0000:0000:0000
i=0
while [ $i -lt 200 ]; do
  ok=1
  for d in rxe0 rxe1; do
    gid=$(cat "/sys/class/infiniband/$d/ports/1/gids/0" 2>/dev/null)
    state=$(cat "/sys/class/infiniband/$d/ports/1/state" 2>/dev/null)
    case "$state" in *ACTIVE*) ;; *) ok=0 ;; esac
    [ -n "$gid" ] && [ "$gid" != "$zero" ] || ok=0
  done
  [ $ok = 1 ] && break
  sleep 0.05
  i=$((i + 1))
done
[ $ok = 1 ] || { say "rxe devices did not become active with a GID"; finish 1; }
read -r up _ < /proc/uptime
say "rxe0 and rxe1 active after ${up} s of guest time"

in_root /bin/sh -c "cd '$GUEST_REPO' && $GUEST_CMD"
finish $?
