package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/evjournal/containerd/integration/fixture"
)

// TestRebootExitsOnce simulates a reboot under a real daemon: containers a
// (with a running exec) and b run, then the daemon, the shims and the
// containers vanish with the state dir while the journal dir stays, and the
// boot id is another one. The daemons started next (the first ones SIGKILLed
// at several points of their start) journal exactly one exit 255 for each
// process that was running: a's exec, a, b; nothing for c, which had exited.
func TestRebootExitsOnce(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	id := fixture.UniqueID(t)
	a, b, c := id+"-a", id+"-b", id+"-c"
	for _, x := range []string{a, b, c} {
		create(t, d, x, fixture.NewBundle(t, fixture.Args("sleep", "forever")))
	}
	addProcess(t, d, execReq(a, "e1", "sleep", "forever"))
	evs := d.SubscribeAfter(time.Now(), c)
	signal(t, d, c, "init", syscall.SIGKILL)
	evs.Expect("exit " + c + " init 137")
	evs.Close()

	// The reboot: everything of /run is gone, the journal dir stays.
	d.Kill()
	entries, _ := os.ReadDir(d.RuncRoot)
	for _, e := range entries {
		exec.Command(fixture.Runc(t), "--root", d.RuncRoot, "delete", "--force", e.Name()).Run()
	}
	fixture.Leaks(d.StateDir) // the shims
	if err := os.RemoveAll(d.StateDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.JournalDir, "containerd.boot_id"), []byte("00000000-0000-0000-0000-000000000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Daemons SIGKILLed during their start, then one that runs.
	for _, delay := range []time.Duration{0, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond} {
		cmd := exec.Command(fixture.Containerd(t), d.Flags()...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay) // a crash at some point of the start, whichever
		cmd.Process.Kill()
		cmd.Wait()
	}
	d.Start()
	var exits []string
	all := storedSince(t, d, &timestamppb.Timestamp{}, "")
	for _, ev := range all {
		if ev.GetType() == "exit" {
			exits = append(exits, fixture.Describe(ev))
		}
		if ev.GetType() == "exit" && ev.GetId() == a && ev.GetPid() == "init" &&
			(len(exits) < 2 || exits[len(exits)-2] != "exit "+a+" e1 255") {
			t.Errorf("a's init exit before its exec's: %q", exits)
		}
	}
	sort.Strings(exits)
	want := []string{"exit " + a + " e1 255", "exit " + a + " init 255", "exit " + b + " init 255", "exit " + c + " init 137"}
	sort.Strings(want)
	if len(exits) != len(want) {
		t.Fatalf("exits after the reboot %q, want %q", exits, want)
	}
	for i := range want {
		if exits[i] != want[i] {
			t.Fatalf("exits after the reboot %q, want %q", exits, want)
		}
	}

	// The journal kept its id across the restarts: a cursor with it is
	// served, one with another id refused (ctr events --journal-id).
	jid := all[0].GetJournalId()
	if len(jid) != 32 || all[len(all)-1].GetJournalId() != jid {
		t.Fatalf("journal ids %q .. %q", jid, all[len(all)-1].GetJournalId())
	}
	if r := ctr(t, d, "events", "--stored-only", "--after-seq", "1", "--journal-id", jid); r.code != 0 {
		t.Errorf("ctr events with this journal's id: exit %d: %s", r.code, r.stderr)
	}
	r := ctr(t, d, "events", "--stored-only", "--after-seq", "1", "--journal-id", strings.Repeat("0", 32))
	if r.code == 0 || !strings.Contains(r.stderr, "is from journal "+strings.Repeat("0", 32)) {
		t.Errorf("ctr events with another journal's id: exit %d: %s", r.code, r.stderr)
	}
}
