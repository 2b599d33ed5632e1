#!/bin/sh
# cpu-hog.sh CMD [ARGS...]: runs CMD while a CPU hog keeps every core busy,
# the condition of a shared CI runner or a laptop with other work open, and
# stops the hog when CMD ends (whatever way it ends). Its exit status is
# CMD's.
#
# The hog is stress-ng --cpu N (Debian's stress-ng package) where it is
# installed, else N shell busy loops. N is the number of online cores
# (HOG_WORKERS overrides it); HOG_NICE (default 0: the same priority as
# the tests) sets the hog's nice value.
set -u
n=${HOG_WORKERS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}
nice=${HOG_NICE:-0}
pids=""
stop() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	pids=""
}
trap stop EXIT
trap 'exit 130' INT TERM
if command -v stress-ng >/dev/null 2>&1; then
	nice -n "$nice" stress-ng --cpu "$n" --quiet &
	pids=$!
	echo "cpu-hog: stress-ng --cpu $n (pid $pids, nice $nice)"
else
	i=0
	while [ "$i" -lt "$n" ]; do
		nice -n "$nice" sh -c 'while :; do :; done' &
		pids="$pids $!"
		i=$((i + 1))
	done
	echo "cpu-hog: $n busy loops (nice $nice)"
fi
"$@"
rc=$?
stop
echo "cpu-hog: $* exited $rc"
exit "$rc"
