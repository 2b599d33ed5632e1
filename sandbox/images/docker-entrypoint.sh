#!/bin/sh
# docker-entrypoint.sh: entrypoint of the distlock substitute images that
# scripts/build-images.sh builds from Debian packages when the official images
# cannot be pulled. It accepts the settings the official images accept, for
# the subset the sandbox uses:
#
#   redis:      arguments starting with "-" (or a *.conf path) run redis-server.
#   mariadb:    "mariadbd"/"mysqld" first runs mariadb-install-db on an empty
#               /var/lib/mysql, honouring MARIADB_ROOT_PASSWORD /
#               MYSQL_ROOT_PASSWORD, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD /
#               MYSQL_ALLOW_EMPTY_PASSWORD and MARIADB_DATABASE / MYSQL_DATABASE.
#   zookeeper:  "zkServer.sh start-foreground" writes /conf/zoo.cfg from the
#               ZOO_* variables (when absent) and myid from ZOO_MY_ID.
#   anything else (etcd ...) is executed as given.
set -eu

mariadb_main() {
	datadir=/var/lib/mysql
	init=/var/lib/distlock-mariadb-init.sql
	pw="${MARIADB_ROOT_PASSWORD:-${MYSQL_ROOT_PASSWORD:-}}"
	db="${MARIADB_DATABASE:-${MYSQL_DATABASE:-}}"
	empty="${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:-${MYSQL_ALLOW_EMPTY_PASSWORD:-}}"
	mkdir -p /run/mysqld "$datadir"
	chown mysql:mysql /run/mysqld "$datadir"
	if [ ! -d "$datadir/mysql" ]; then
		if [ -z "$pw" ] && [ -z "$empty" ]; then
			echo "entrypoint: database is uninitialized and no root password option is set" >&2
			echo "entrypoint: set MARIADB_ROOT_PASSWORD or MARIADB_ALLOW_EMPTY_ROOT_PASSWORD" >&2
			exit 1
		fi
		echo "entrypoint: initialising $datadir" >&2
		mariadb-install-db --no-defaults --user=mysql --datadir="$datadir" \
			--auth-root-authentication-method=normal --skip-test-db >/dev/null
		q=$(printf '%s' "$pw" | sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g")
		{
			echo "CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '$q';"
			echo "ALTER USER 'root'@'%' IDENTIFIED BY '$q';"
			echo "GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;"
			echo "ALTER USER IF EXISTS 'root'@'localhost' IDENTIFIED BY '$q';"
			if [ -n "$db" ]; then
				echo "CREATE DATABASE IF NOT EXISTS \`$db\`;"
			fi
		} >"$init"
		chown mysql:mysql "$init"
	fi
	set -- --no-defaults --user=mysql --datadir="$datadir" \
		--socket=/run/mysqld/mysqld.sock --bind-address=0.0.0.0 --port=3306 "$@"
	if [ -f "$init" ]; then
		# Idempotent statements: kept for every start so an interrupted
		# first start still finishes the setup.
		set -- "$@" --init-file="$init"
	fi
	exec mariadbd "$@"
}

zookeeper_config() {
	: "${ZOO_CONF_DIR:=/conf}" "${ZOO_DATA_DIR:=/data}" "${ZOO_DATA_LOG_DIR:=/datalog}"
	mkdir -p "$ZOO_CONF_DIR" "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR"
	cfg="$ZOO_CONF_DIR/zoo.cfg"
	if [ ! -f "$cfg" ]; then
		{
			echo "dataDir=$ZOO_DATA_DIR"
			echo "dataLogDir=$ZOO_DATA_LOG_DIR"
			echo "tickTime=${ZOO_TICK_TIME:-2000}"
			echo "initLimit=${ZOO_INIT_LIMIT:-5}"
			echo "syncLimit=${ZOO_SYNC_LIMIT:-2}"
			echo "autopurge.snapRetainCount=${ZOO_AUTOPURGE_SNAPRETAINCOUNT:-3}"
			echo "autopurge.purgeInterval=${ZOO_AUTOPURGE_PURGEINTERVAL:-0}"
			echo "maxClientCnxns=${ZOO_MAX_CLIENT_CNXNS:-60}"
			echo "standaloneEnabled=${ZOO_STANDALONE_ENABLED:-true}"
			echo "admin.enableServer=${ZOO_ADMINSERVER_ENABLED:-true}"
			for server in ${ZOO_SERVERS:-server.1=localhost:2888:3888;2181}; do
				echo "$server"
			done
			if [ -n "${ZOO_4LW_COMMANDS_WHITELIST:-}" ]; then
				echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST"
			fi
			for extra in ${ZOO_CFG_EXTRA:-}; do
				echo "$extra"
			done
		} >"$cfg"
	fi
	if [ ! -f "$ZOO_DATA_DIR/myid" ]; then
		echo "${ZOO_MY_ID:-1}" >"$ZOO_DATA_DIR/myid"
	fi
}

case "${1:-}" in
-* | *.conf) set -- redis-server "$@" ;;
esac

case "${1:-}" in
mariadbd | mysqld)
	shift
	mariadb_main "$@"
	;;
zkServer.sh)
	zookeeper_config
	;;
esac
exec "$@"
