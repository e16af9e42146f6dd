#!/usr/bin/env bash
# The local sandbox's cgroup v2 path, checked on a pure cgroup v2 kernel where this machine has
# cgroup v1 (docs/security.md, "Sandbox containment").
#
#   bash scripts/cgroup-v2-vm.sh [PYTEST ARGS...]   (default: the local sandbox tests)
#
# Boots Debian 12's stock kernel (linux-image-6.1.0-*-amd64, downloaded with apt-get, cached
# under /var/cache/steplab/v2-vm) in QEMU with cgroup_no_v1=all: only the unified hierarchy,
# every controller in it. The guest sees this machine's root read-only over 9p (tmpfs on /tmp
# and /run), switches to it as root and runs `CI=true .venv/bin/python -m pytest ARGS` in this
# checkout (SQLite, no services). Exits with pytest's status. Needs root (apt-get) and about
# 2.5 minutes for the sandbox tests: QEMU emulates the CPU (TCG), because nested KVM does not
# start a guest on our machines.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=/var/cache/steplab/v2-vm
[ $# -gt 0 ] || set -- tests/trainer_core/sandboxes/test_local_sandbox.py
if printf '%s' "$*" | grep -q '[^A-Za-z0-9_./:= -]'; then
  echo "pytest arguments: letters, digits, spaces and _./:=- only (they travel on the kernel command line)" >&2
  exit 2
fi

missing=()
command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p "$CACHE"
if [ ! -f "$CACHE/vmlinuz" ]; then
  pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/{print $2; exit}')
  (cd "$CACHE" && apt-get download "$pkg" >/dev/null 2>&1)
  rm -rf "$CACHE/pkg" && dpkg-deb -x "$CACHE"/"$pkg"_*.deb "$CACHE/pkg" && rm -f "$CACHE"/*.deb
  cp "$CACHE"/pkg/boot/vmlinuz-* "$CACHE/vmlinuz"
  kernel=$(ls "$CACHE"/pkg/lib/modules)
  mkdir -p "$CACHE/initrd/bin" "$CACHE/initrd/lib/modules"
  for m in drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_legacy_dev \
           drivers/virtio/virtio_pci_modern_dev drivers/virtio/virtio_pci fs/netfs/netfs \
           fs/fscache/fscache net/9p/9pnet net/9p/9pnet_virtio fs/9p/9p; do
    cp "$CACHE/pkg/lib/modules/$kernel/kernel/$m.ko" "$CACHE/initrd/lib/modules/"
  done
  rm -rf "$CACHE/pkg"
fi

initrd=$CACHE/initrd
mkdir -p "$initrd"/{proc,sys,dev,mnt}
cp /bin/busybox "$initrd/bin/busybox"
cat > "$initrd/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p; do
  insmod /lib/modules/$m.ko
done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=loose hostroot /mnt || poweroff -f
mount -t proc proc /mnt/proc; mount -t sysfs sys /mnt/sys; mount -t cgroup2 none /mnt/sys/fs/cgroup
mount -t devtmpfs dev /mnt/dev; mkdir -p /mnt/dev/pts /mnt/dev/shm
mount -t devpts devpts /mnt/dev/pts; mount -t tmpfs shm /mnt/dev/shm
mount -t tmpfs tmp /mnt/tmp; mount -t tmpfs run /mnt/run
exec switch_root /mnt /bin/bash -c '
  export HOME=/tmp PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin PYTHONDONTWRITEBYTECODE=1
  export OMP_NUM_THREADS=1 STEPLAB_TEST_DB=sqlite CI=true
  cd "$STEPLAB_REPO"
  echo "=== guest kernel $(uname -r); $(grep cgroup /proc/mounts); controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
  .venv/bin/python -m pytest -p no:cacheprovider --color=no -q -ra $STEPLAB_PYTEST
  echo "=== pytest exit $?"
  echo o > /proc/sysrq-trigger; sleep 10'
EOF
chmod +x "$initrd/init"
(cd "$initrd" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1 > "$CACHE/initrd.cpio.gz")

log=$(mktemp)
# Kernel parameters with "=" that the kernel does not know reach init as environment variables.
qemu-system-x86_64 -accel tcg -cpu max -m 2048 -smp 2 -nographic -no-reboot -nic none \
  -kernel "$CACHE/vmlinuz" -initrd "$CACHE/initrd.cpio.gz" \
  -append "console=ttyS0 quiet panic=-1 cgroup_no_v1=all STEPLAB_REPO=$REPO STEPLAB_PYTEST=\"$*\"" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap \
  2>/dev/null | tee "$log" | grep -v "^\s*$" | grep -av "Memory cgroup out of memory\|^\[\|SeaBIOS\|Booting from ROM" || true
status=$(sed -n 's/.*=== pytest exit \([0-9]*\).*/\1/p' "$log" | tail -1)
rm -f "$log"
exit "${status:-1}"
