#!/bin/sh
# install-servers.sh: install the Debian-packaged servers the sandbox's
# "local" provider runs (redis-server, mariadbd, etcd, ZooKeeper via java,
# postgres),
# plus debootstrap for scripts/build-images.sh, chromium, in which the
# tests of the bench module render the distlock-bench report (headless), and iptables
# and iproute2 (ss), with which a zklock test cuts one ensemble member's
# loopback connections to another, and stress-ng, the CPU hog of
# scripts/cpu-hog.sh (make test-loaded).
#
# Idempotent: does nothing when every package is already installed.
# Must run as root (or through sudo) on a Debian/Ubuntu machine.
#
# Package postinst scripts would start the services on their default ports;
# the install is guarded by a /usr/sbin/policy-rc.d that exits 101 ("action
# forbidden"), which is removed afterwards only if this script created it.
set -eu

PACKAGES="redis-server redis-tools mariadb-server mariadb-client etcd-server etcd-client
libzookeeper-java default-jre-headless libslf4j-java postgresql debootstrap chromium iptables iproute2 stress-ng"

missing=""
for p in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
if [ -z "$missing" ]; then
	echo "install-servers: all packages present"
	exit 0
fi
echo "install-servers: installing:$missing"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "install-servers: must run as root (or have sudo)" >&2
		exit 1
	fi
fi

POLICY=/usr/sbin/policy-rc.d
created_policy=0
cleanup() {
	if [ "$created_policy" = 1 ]; then
		$SUDO rm -f "$POLICY"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ ! -e "$POLICY" ]; then
	printf '#!/bin/sh\n# created by distlock scripts/install-servers.sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
	$SUDO chmod 755 "$POLICY"
	created_policy=1
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086 # word splitting of the package list is intended
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing

# Some init systems start services regardless of policy-rc.d (systemd units
# enabled at boot). Stop the packaged services so they do not hold default
# ports; the sandbox never uses them.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	for s in redis-server mariadb etcd postgresql; do
		$SUDO systemctl disable --now "$s" >/dev/null 2>&1 || true
	done
fi
echo "install-servers: done"
