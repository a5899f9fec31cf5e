package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
)

// oomAfterStartRuntime writes a runtime that is runc, except that its
// `start` returns only once the container's memory cgroup has counted an
// OOM kill: the shim reports the start, and the daemon arms its OOM watch,
// after the kill. (The cgroup path is read before the start, while the
// init is alive; the dead init's cgroup stays until `runc delete`.)
func oomAfterStartRuntime(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runc-oom-after-start")
	script := fmt.Sprintf(`#!/bin/bash
RUNC=%s
args=("$@"); n=$#
if [ "$n" -ge 2 ] && [ "${args[n-2]}" = start ]; then
	id=${args[n-1]}
	pid=$("$RUNC" "${args[@]:0:n-2}" state "$id" | sed -n 's/^ *"pid": *\([0-9]*\),*$/\1/p')
	cg=$(sed -n 's/^[0-9]*:[^:]*memory[^:]*:\(.*\)$/\1/p' /proc/$pid/cgroup)
	ctl=/sys/fs/cgroup/memory$cg/memory.oom_control
	"$RUNC" "$@" || exit $?
	for i in $(seq 2000); do
		grep -q '^oom_kill [1-9]' "$ctl" && exit 0
		sleep 0.005
	done
	echo "no OOM kill counted in $ctl within 10 s" >&2
	exit 0
fi
exec "$RUNC" "$@"
`, fixture.Runc(t))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOOMBeforeWatchArmed: a container OOM-killed before the daemon could
// arm its OOM watch (the runtime's start returns only after the kill) still
// gets its oom event, once, before its exit: the watch counts from the
// counter the shim read before the start, not from the one it finds.
func TestOOMBeforeWatchArmed(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.oom_control"); err != nil {
		t.Skip("no cgroup v1 memory controller at /sys/fs/cgroup/memory: this machine cannot OOM-kill in a v1 memory cgroup")
	}
	d := startDaemonWith(t, func(d *fixture.Daemon) { d.Runtime = oomAfterStartRuntime(t) })
	id := fixture.UniqueID(t)
	evs := d.SubscribeAfter(time.Now(), id)
	create(t, d, id, fixture.NewBundle(t, fixture.MemoryLimit(16<<20), fixture.Args("alloc")))
	got := evs.Expect("start-container "+id, "oom "+id, "exit "+id+" init 137")
	wantEvents(t, "journal of the container killed before the watch", storedSince(t, d, got[0].Timestamp, id),
		"oom "+id, "exit "+id+" init 137")
	wantGone(t, d, id)
}
