#!/bin/sh
# cleanup-containers.sh: remove containers and networks the distlock sandbox
# left behind (a test binary that died cannot close its servers, and the
# testcontainers reaper is disabled because its image cannot be pulled).
#
#   scripts/cleanup-containers.sh          remove sandbox containers whose
#                                          creating process is gone
#   scripts/cleanup-containers.sh --all    remove every sandbox container
#                                          (label distlock.sandbox=1), even
#                                          of test runs still going
#   scripts/cleanup-containers.sh --all-testcontainers
#                                          also everything labelled
#                                          org.testcontainers=true
#   --dry-run                              only print what would go
#
# The creating process is read from the label distlock.sandbox.pid and
# checked on this host; a container without it counts as orphaned. Without
# a reachable Docker engine there is nothing to clean and the script exits 0.
set -eu

MODE=stale
DRY=0
for arg in "$@"; do
	case "$arg" in
	--all) MODE=all ;;
	--all-testcontainers) MODE=testcontainers ;;
	--dry-run) DRY=1 ;;
	-h | --help)
		sed -n '2,19p' "$0"
		exit 0
		;;
	*)
		echo "cleanup-containers: unknown argument $arg" >&2
		exit 2
		;;
	esac
done

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
	echo "cleanup-containers: no docker engine reachable: nothing to clean"
	exit 0
fi

# orphaned ID prints ID when its creating process no longer runs here.
orphaned() {
	pid=$(docker inspect -f '{{ index .Config.Labels "distlock.sandbox.pid" }}' "$1" 2>/dev/null || true)
	if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "$1"
	fi
}

containers=$(docker ps -aq --filter label=distlock.sandbox=1)
case "$MODE" in
stale)
	victims=""
	for id in $containers; do
		victims="$victims $(orphaned "$id")"
	done
	;;
all) victims="$containers" ;;
testcontainers) victims="$containers $(docker ps -aq --filter label=org.testcontainers=true)" ;;
esac
victims=$(echo "$victims" | tr ' ' '\n' | sed '/^$/d' | sort -u)

removed=0
for id in $victims; do
	name=$(docker inspect -f '{{ .Name }} ({{ .Config.Image }})' "$id" 2>/dev/null || echo "$id")
	if [ "$DRY" = 1 ]; then
		echo "would remove container $id $name"
		continue
	fi
	# Paused containers must be thawed before they can be killed.
	docker unpause "$id" >/dev/null 2>&1 || true
	if docker rm -f -v "$id" >/dev/null 2>&1; then
		echo "removed container $id $name"
		removed=$((removed + 1))
	fi
done

# Networks: the sandbox's once no container uses them (docker refuses to
# remove a network in use, which keeps running test groups safe).
filter=label=distlock.sandbox=1
[ "$MODE" = testcontainers ] && filter=label=org.testcontainers=true
for nw in $(docker network ls -q --filter "$filter"); do
	if [ "$DRY" = 1 ]; then
		echo "would remove network $nw (if unused)"
	elif docker network rm "$nw" >/dev/null 2>&1; then
		echo "removed network $nw"
	fi
done
echo "cleanup-containers: removed $removed container(s)"
