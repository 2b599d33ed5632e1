#!/bin/sh
# build-images.sh: build substitute server images for the distlock sandbox
# from Debian packages, with no registry access (nothing is pulled).
#
#   scripts/build-images.sh [--force]
#
# Steps: debootstrap --variant=minbase of the host's Debian suite (mirror taken
# from this machine's apt configuration), with redis, mariadb, etcd, the
# ZooKeeper jars and postgresql; strip caches and docs; `tar | docker import`
# into a base image; then derive one image per server with `docker create` +
# `docker commit -c ...` (no builder, no Dockerfile, no buildx). A base built
# before PostgreSQL joined lacks it: the postgres image is then derived by
# installing postgresql into a container of that base (apt-get from the
# base's own mirror, about a minute) instead of rebuilding the base.
#
# Images (PREFIX defaults to distlock-local, TAG to the suite, e.g. bookworm):
#   PREFIX/base:TAG  PREFIX/redis:TAG  PREFIX/mariadb:TAG
#   PREFIX/zookeeper:TAG  PREFIX/etcd:TAG  PREFIX/postgres:TAG
#   (each server image also as :latest)
# Existing images are kept unless --force is given. The sandbox uses
# PREFIX/<kind>:latest automatically when the official image is not present
# locally; the exports printed at the end make the choice explicit.
#
# Environment: DISTLOCK_SUITE (default: VERSION_CODENAME of /etc/os-release),
# DISTLOCK_MIRROR (default: from /etc/apt/sources.list.d/debian.sources or
# /etc/apt/sources.list), DISTLOCK_LOCAL_IMAGE_PREFIX (default distlock-local).
# Needs root, docker and debootstrap (scripts/install-servers.sh installs it).
set -eu

FORCE=0
for arg in "$@"; do
	case "$arg" in
	--force) FORCE=1 ;;
	-h | --help)
		sed -n '2,28p' "$0"
		exit 0
		;;
	*)
		echo "build-images: unknown argument $arg" >&2
		exit 2
		;;
	esac
done

HERE=$(cd "$(dirname "$0")" && pwd)
FILES="$HERE/../sandbox/images"
PREFIX="${DISTLOCK_LOCAL_IMAGE_PREFIX:-distlock-local}"
# shellcheck disable=SC1091
SUITE="${DISTLOCK_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}"
PACKAGES="redis-server,redis-tools,mariadb-server,mariadb-client,etcd-server,etcd-client,libzookeeper-java,default-jre-headless,libslf4j-java,postgresql"

die() {
	echo "build-images: $*" >&2
	exit 1
}

[ -n "$SUITE" ] || die "cannot tell the Debian suite: set DISTLOCK_SUITE"
[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap and chroot need it)"
command -v docker >/dev/null 2>&1 || die "docker CLI not found"
docker info >/dev/null 2>&1 || die "no docker engine reachable (docker info failed)"
for f in docker-entrypoint.sh zkServer.sh; do
	[ -f "$FILES/$f" ] || die "missing $FILES/$f"
done

# mirror prints the first archive URI configured for $SUITE in this machine's
# apt sources (deb822 first, then the one-line format).
mirror() {
	if [ -n "${DISTLOCK_MIRROR:-}" ]; then
		echo "$DISTLOCK_MIRROR"
		return
	fi
	f=/etc/apt/sources.list.d/debian.sources
	if [ -f "$f" ]; then
		awk -v suite="$SUITE" '
			function flush() { if (found == "" && uri != "" && hit) found = uri; uri = ""; hit = 0 }
			/^[ \t]*$/ { flush(); next }
			/^URIs:/ { uri = $2 }
			/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) hit = 1 }
			END { flush(); if (found != "") print found }
		' "$f"
		return
	fi
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk -v suite="$SUITE" '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) == suite) { print $i; exit }
			}
		' "$f"
	done | head -n 1
}

image_exists() {
	docker image inspect "$1" >/dev/null 2>&1
}

build_base() {
	base="$1"
	uri=$(mirror)
	[ -n "$uri" ] || die "no apt source for suite $SUITE found: set DISTLOCK_MIRROR"
	work=$(mktemp -d /var/tmp/distlock-rootfs.XXXXXX)
	# shellcheck disable=SC2064 # expand $work now
	trap "release_chroot '$work/root'; rm -rf --one-file-system '$work'" EXIT
	trap 'exit 130' INT TERM
	root="$work/root"
	echo "build-images: debootstrap $SUITE from $uri (a few minutes)"
	debootstrap --variant=minbase --foreign --include="$PACKAGES" "$SUITE" "$root" "$uri" >"$work/debootstrap.log" 2>&1 ||
		{ tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap (first stage) failed"; }
	# Keep package scripts from starting services inside the chroot.
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 755 "$root/usr/sbin/policy-rc.d"
	chroot "$root" /debootstrap/debootstrap --second-stage >>"$work/debootstrap.log" 2>&1 ||
		{ tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap (second stage) failed"; }
	release_chroot "$root"
	rm -f "$root/usr/sbin/policy-rc.d"

	install -m 755 "$FILES/docker-entrypoint.sh" "$root/usr/local/bin/docker-entrypoint.sh"
	install -m 755 "$FILES/zkServer.sh" "$root/usr/local/bin/zkServer.sh"
	ln -sf /usr/bin/etcd "$root/usr/local/bin/etcd"
	ln -sf /usr/bin/etcdctl "$root/usr/local/bin/etcdctl"
	# Server state starts empty: the entrypoint initialises it at first start.
	rm -rf "$root/var/lib/mysql" "$root/var/lib/redis"/* "$root/var/lib/etcd"/*
	drop_postgres_cluster "$root"
	mkdir -p "$root/data" "$root/datalog" "$root/conf" "$root/var/lib/mysql" "$root/run/mysqld" "$root/var/lib/etcd"
	chroot "$root" chown mysql:mysql /var/lib/mysql /run/mysqld
	rm -rf "$root/var/cache/apt"/* "$root/var/lib/apt/lists"/* "$root/usr/share/doc"/* \
		"$root/usr/share/man"/* "$root/usr/share/info"/* "$root/var/log"/*.log "$root/debootstrap"

	echo "build-images: importing $base"
	tar --numeric-owner --one-file-system -C "$root" -c . | docker import \
		-c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		-c 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
		-m "distlock sandbox base: Debian $SUITE minbase with server packages" \
		- "$base" >/dev/null
	release_chroot "$root"
	rm -rf --one-file-system "$work"
	trap - EXIT INT TERM
}

# drop_postgres_cluster removes the "main" cluster postgresql's postinst
# creates under ROOT: the entrypoint makes its own in $PGDATA.
drop_postgres_cluster() {
	rm -rf "$1/var/lib/postgresql"/*/main "$1/etc/postgresql"/*/main
}

# release_chroot kills any process whose root directory is the chroot (a
# package script that started a daemon despite policy-rc.d) and unmounts what
# debootstrap mounted inside it, so nothing below it is a host file system.
release_chroot() {
	r=$(readlink -f "$1" 2>/dev/null) || return 0
	for p in /proc/[0-9]*; do
		if [ "$(readlink "$p/root" 2>/dev/null)" = "$r" ]; then
			kill -9 "${p#/proc/}" 2>/dev/null || true
		fi
	done
	# Deepest mount points first.
	awk -v r="$r" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r |
		while IFS= read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		done
}

# derive REPO makes REPO:SUITE from the base image with docker commit,
# applying the Dockerfile-style lines in $CHANGES, and tags it REPO:latest.
derive() {
	repo="$1" # "set --" below replaces the positional parameters
	name="$repo:$SUITE"
	if image_exists "$name" && [ "$FORCE" = 0 ]; then
		echo "build-images: $name exists (use --force to rebuild)"
	else
		if [ -n "${SETUP:-}" ]; then
			# Run SETUP in a container of the base, then commit that.
			ctr=$(docker create --label distlock.sandbox.build=1 --entrypoint /bin/sh "$BASE" -c "$SETUP")
			docker start -a "$ctr" >&2 || {
				docker rm "$ctr" >/dev/null
				die "setting up $name failed"
			}
		else
			ctr=$(docker create --label distlock.sandbox.build=1 "$BASE")
		fi
		# The entrypoint of this checkout, which may be newer than the
		# base's (a new server kind).
		docker cp "$FILES/docker-entrypoint.sh" "$ctr:/usr/local/bin/docker-entrypoint.sh" || {
			docker rm "$ctr" >/dev/null
			die "copy the entrypoint into $name failed"
		}
		set --
		while IFS= read -r change; do
			[ -n "$change" ] && set -- "$@" -c "$change"
		done <<CHANGES
$CHANGES
CHANGES
		docker commit "$@" "$ctr" "$name" >/dev/null || {
			docker rm "$ctr" >/dev/null
			die "commit $name failed"
		}
		docker rm "$ctr" >/dev/null
		echo "build-images: built $name"
	fi
	docker tag "$name" "$repo:latest"
}

start=$(date +%s)
BASE="$PREFIX/base:$SUITE"
if image_exists "$BASE" && [ "$FORCE" = 0 ]; then
	echo "build-images: $BASE exists (use --force to rebuild)"
else
	build_base "$BASE"
	FORCE=1 # derived images must follow a new base
fi

CHANGES='ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["redis-server"]
EXPOSE 6379
WORKDIR /data'
derive "$PREFIX/redis"

CHANGES='ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["mariadbd"]
EXPOSE 3306'
derive "$PREFIX/mariadb"

CHANGES='ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["zkServer.sh", "start-foreground"]
ENV ZOO_CONF_DIR=/conf ZOO_DATA_DIR=/data ZOO_DATA_LOG_DIR=/datalog
EXPOSE 2181 2888 3888
WORKDIR /data'
derive "$PREFIX/zookeeper"

CHANGES='ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["/usr/local/bin/etcd"]
EXPOSE 2379 2380
WORKDIR /var/lib/etcd'
derive "$PREFIX/etcd"

# PostgreSQL: in the base already, or installed on top of an older base.
SETUP=""
if ! docker run --rm --entrypoint /bin/sh "$BASE" -c 'ls /usr/lib/postgresql/*/bin/postgres' >/dev/null 2>&1; then
	echo "build-images: $BASE has no postgresql: installing it in a container of the base"
	SETUP='set -e
printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d
chmod 755 /usr/sbin/policy-rc.d
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends postgresql >/dev/null
rm -f /usr/sbin/policy-rc.d
rm -rf /var/lib/postgresql/*/main /etc/postgresql/*/main
rm -rf /var/cache/apt/* /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* /var/log/*.log'
fi
# docker commit cannot set STOPSIGNAL: the image stops with SIGTERM (a smart
# shutdown, which waits for clients to leave); the sandbox creates its
# containers with SIGINT (fast shutdown), the official image's STOPSIGNAL.
CHANGES='ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["postgres"]
ENV PGDATA=/var/lib/postgresql/data
EXPOSE 5432'
derive "$PREFIX/postgres"
SETUP=""

echo "build-images: done in $(($(date +%s) - start)) s"
echo "# The sandbox uses $PREFIX/<kind>:latest by itself when the official image"
echo "# is absent (DISTLOCK_LOCAL_IMAGE_PREFIX must match a non-default prefix)."
echo "# To select these images explicitly:"
echo "export DISTLOCK_IMAGE_REDIS=$PREFIX/redis:$SUITE"
echo "export DISTLOCK_IMAGE_MARIADB=$PREFIX/mariadb:$SUITE"
echo "export DISTLOCK_IMAGE_ZOOKEEPER=$PREFIX/zookeeper:$SUITE"
echo "export DISTLOCK_IMAGE_ETCD=$PREFIX/etcd:$SUITE"
echo "export DISTLOCK_IMAGE_POSTGRES=$PREFIX/postgres:$SUITE"
