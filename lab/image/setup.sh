#!/bin/sh
# Runs inside the debootstrapped root (chroot) to make it a lab "Spark": systemd as init,
# sshd with key-only root login, host keys made per container at first boot, networkd
# for netplan, and nothing that fights a container (getty, udev triggers, timesyncd).
set -eu
echo 'root:*' | chpasswd -e
mkdir -p /root/.ssh && chmod 0700 /root/.ssh
cat > /etc/ssh/sshd_config.d/10-sparkfold-lab.conf <<'CONF'
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
# The lab's controller key is mounted here; root's own authorized_keys stays a plain
# file for roles to manage, as on a real Spark.
AuthorizedKeysFile .ssh/authorized_keys /etc/ssh/sparkfold-lab/authorized_keys
CONF
# Each container must get its own host keys: drop the ones made at install time and
# make them when sshd first starts.
rm -f /etc/ssh/ssh_host_*
mkdir -p /etc/systemd/system/ssh.service.d
cat > /etc/systemd/system/ssh.service.d/10-hostkeys.conf <<'CONF'
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
CONF
systemctl enable ssh.service systemd-networkd.service
# systemd-networkd-wait-online too: the management link is podman's (networkd does not manage
# it) and the rails are optional, so networkd has no link it could report online, and wait-online
# would hold network-online.target for its whole 2-minute timeout: the first start of an engine
# rank after each boot (its unit is After=network-online.target) waited 2 minutes, 4 per
# converge of a fresh lab (followers, then rank 0). On a Spark the management link is up within
# seconds of boot; masked, network-online.target is reached at once, as with a link already up.
for unit in getty.target console-getty.service systemd-timesyncd.service \
    systemd-udev-trigger.service systemd-udevd.service systemd-udevd-control.socket \
    systemd-udevd-kernel.socket apt-daily.timer apt-daily-upgrade.timer \
    e2scrub_all.timer fstrim.timer systemd-networkd-wait-online.service; do
  systemctl mask "$unit" >/dev/null 2>&1 || true
done
# A container cannot write uevents to /sys, so `udevadm trigger` (run by `netplan apply`)
# fails there. The lab makes only that subcommand a no-op; netplan, networkd and the role
# are otherwise exactly what runs on a Spark.
dpkg-divert --quiet --local --rename --divert /usr/bin/udevadm.real --add /usr/bin/udevadm
cat > /usr/bin/udevadm <<'SHIM'
#!/bin/sh
[ "$1" = trigger ] && exit 0
exec /usr/bin/udevadm.real "$@"
SHIM
chmod 0755 /usr/bin/udevadm
# Keep downloaded packages: the lab shares /var/cache/apt/archives with the host cache.
cat > /etc/apt/apt.conf.d/10-sparkfold-lab <<'CONF'
APT::Keep-Downloaded-Packages "true";
Binary::apt::APT::Keep-Downloaded-Packages "true";
CONF
rm -f /etc/apt/apt.conf.d/docker-clean
cat > /etc/apt/sources.list <<'CONF'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
CONF
# pip inside the lab trusts the same CA bundle as the host (outbound TLS is intercepted).
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > /etc/pip.conf
echo 'sparkfold-lab' > /etc/sparkfold-lab
# Every node needs its own machine-id: udev derives persistent MAC addresses from it, and
# two nodes with one machine-id would get one MAC on the management network after
# `netplan apply`. An empty file makes systemd create one at boot.
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id
# Package lists for all three suites, so roles that install packages find them (apt's
# cache_valid_time takes an empty list directory for a fresh one).
apt-get update -qq
apt-get clean
rm -rf /tmp/* /var/log/*.log
