#!/bin/sh
# zkServer.sh: minimal stand-in for ZooKeeper's launcher in the distlock
# substitute image (Debian's libzookeeper-java ships no launcher). Only
# "start-foreground [zoo.cfg]" is supported, as used by the sandbox and by the
# official image's default command. JVMFLAGS and SERVER_JVMFLAGS are honoured.
set -eu
if [ "${1:-}" != "start-foreground" ]; then
	echo "zkServer.sh (distlock substitute): only start-foreground is supported" >&2
	exit 2
fi
cfg="${2:-${ZOOCFGDIR:-${ZOO_CONF_DIR:-/conf}}/zoo.cfg}"
cp=/usr/share/java/zookeeper.jar
if [ -f /usr/share/java/slf4j-simple.jar ]; then
	cp="$cp:/usr/share/java/slf4j-simple.jar"
fi
# shellcheck disable=SC2086 # JVM flags are a space-separated list
exec java ${JVMFLAGS:-} ${SERVER_JVMFLAGS:-} -cp "$cp" \
	org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
