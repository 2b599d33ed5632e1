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
#   postgres:   "postgres ..." first runs initdb on an empty $PGDATA (default
#               /var/lib/postgresql/data) as the postgres user, honouring
#               POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust),
#               POSTGRES_USER, POSTGRES_DB and POSTGRES_INITDB_ARGS, with
#               password (scram-sha-256) access from any host and
#               listen_addresses='*' like the official image; then runs the
#               server as the postgres user (setpriv: it stays PID 1).
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

postgres_main() {
	for d in /usr/lib/postgresql/*/bin; do
		[ -x "$d/postgres" ] && PATH="$d:$PATH"
	done
	export PATH
	: "${PGDATA:=/var/lib/postgresql/data}"
	export PGDATA
	user="${POSTGRES_USER:-postgres}"
	db="${POSTGRES_DB:-$user}"
	as_postgres="setpriv --reuid=postgres --regid=postgres --init-groups"
	mkdir -p "$PGDATA" /var/run/postgresql
	chown postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	chmod 2775 /var/run/postgresql
	# The marker is written last: a first start interrupted half-way starts
	# over on an empty directory.
	if [ ! -f "$PGDATA/distlock-initialised" ]; then
		auth=scram-sha-256
		if [ -z "${POSTGRES_PASSWORD:-}" ]; then
			if [ "${POSTGRES_HOST_AUTH_METHOD:-}" != trust ]; then
				echo "entrypoint: database is uninitialized and POSTGRES_PASSWORD is not set" >&2
				echo "entrypoint: set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust)" >&2
				exit 1
			fi
			auth=trust
		fi
		echo "entrypoint: initialising $PGDATA" >&2
		find "$PGDATA" -mindepth 1 -delete
		pwfile=$(mktemp)
		printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
		chown postgres "$pwfile"
		pwopt="--pwfile=$pwfile"
		[ -n "${POSTGRES_PASSWORD:-}" ] || pwopt=""
		# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of options
		$as_postgres initdb --username="$user" $pwopt ${POSTGRES_INITDB_ARGS:-} >/dev/null
		rm -f "$pwfile"
		echo "host all all all $auth" >>"$PGDATA/pg_hba.conf"
		echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
		if [ "$db" != postgres ]; then
			# Single-user mode: no server, no socket, no authentication.
			q=$(printf '%s' "$db" | sed 's/"/""/g')
			echo "CREATE DATABASE \"$q\";" | $as_postgres postgres --single -D "$PGDATA" postgres >/dev/null
		fi
		$as_postgres touch "$PGDATA/distlock-initialised"
	fi
	exec $as_postgres postgres "$@"
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
postgres)
	shift
	postgres_main "$@"
	;;
zkServer.sh)
	zookeeper_config
	;;
esac
exec "$@"
