#!/usr/bin/env bash
# make demo: a daemon on a private state dir; a container that prints and
# exits 3; its events, live and replayed; then a daemon crash (SIGKILL) while
# a container is killed, a restart, and the exit replayed exactly once.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/bin
WORK=$(mktemp -d /tmp/ctrd-demo.XXXXXX)
SOCK=$WORK/containerd.sock
STATE=$WORK/state
RUNC_ROOT=$WORK/runc
DAEMON_PID=
LONG_PID=

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
ctr() { "$BIN/ctr" --address "unix://$SOCK" "$@"; }

cleanup() {
	set +e
	[ -n "$DAEMON_PID" ] && kill -INT "$DAEMON_PID" 2>/dev/null && wait "$DAEMON_PID" 2>/dev/null
	for id in $(ls "$RUNC_ROOT" 2>/dev/null); do "$BIN/runc" --root "$RUNC_ROOT" delete --force "$id" >/dev/null 2>&1; done
	# shims of this demo run with their working dir in our state dir
	for p in /proc/[0-9]*; do
		case "$(readlink "$p/cwd" 2>/dev/null)" in "$STATE"*) kill -9 "${p#/proc/}" 2>/dev/null ;; esac
	done
	rm -rf "$WORK"
}
trap cleanup EXIT

start_daemon() {
	"$BIN/containerd" --state-dir "$STATE" --journal-dir "$WORK/journal" --listen "unix://$SOCK" \
		--runtime "$BIN/runc" --runtime-args "--root=$RUNC_ROOT" --shim "$BIN/containerd-shim" \
		>>"$WORK/daemon.log" 2>&1 &
	DAEMON_PID=$!
	for _ in $(seq 200); do
		ctr version >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	echo "daemon did not come up; its log:" >&2
	cat "$WORK/daemon.log" >&2
	return 1
}

say "bundles (rootfs = one static Go binary, no image, no download)"
"$BIN/mkbundle" -testinit "$BIN/testinit" "$WORK/hello" echo "hello from a container" -- exit 3
"$BIN/mkbundle" -testinit "$BIN/testinit" "$WORK/sleeper" sleep forever
echo "made $WORK/hello and $WORK/sleeper"

say "daemon on a private state dir: $STATE"
start_daemon
ctr version

say "ctr containers start --attach hello (prints, then exits 3), watched live by ctr events"
ctr events --id hello >"$WORK/live.txt" 2>&1 &
WATCH=$!
T0=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
set +e
ctr containers start --attach hello "$WORK/hello"
echo "ctr exit status: $?"
set -e
for _ in $(seq 100); do grep -q exit "$WORK/live.txt" && break; sleep 0.02; done
kill "$WATCH"; wait "$WATCH" 2>/dev/null || true

say "the live stream, as ctr events printed it"
cat "$WORK/live.txt"

say "its events, replayed from the journal (stored only)"
ctr events --stored-only --since "$T0" --id hello

say "a long-running container"
ctr containers start sleeper "$WORK/sleeper"
ctr containers list
LONG_PID=$(ctr state sleeper | grep -o '"systemPid": *[0-9]*' | head -1 | grep -o '[0-9]*$')
LAST=$(ctr events --stored-only --format json | tail -1 | grep -o '"time": *"[^"]*"' | cut -d'"' -f4)
echo "sleeper's init is host pid $LONG_PID; last event seen at $LAST"

say "SIGKILL the daemon; the container keeps running"
kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null || true; DAEMON_PID=
kill -0 "$LONG_PID" && echo "pid $LONG_PID still alive with no daemon"

say "kill the container while the daemon is down"
kill -9 "$LONG_PID"
echo "killed $LONG_PID"

say "restart the daemon: it restores and replays the exit it missed"
start_daemon
ctr events --stored-only --timestamp "$LAST"

say "state after restore"
ctr containers list

say "what the daemon logged"
cat "$WORK/daemon.log"
