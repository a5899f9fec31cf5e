package supervisor

import (
	"os"
	"path/filepath"
	"testing"
)

// rebootScenario runs containers a (execs e1, e2; e2 exits), c (exits) and
// b, stops the daemon, then "reboots": the runtime knows no container (the
// state dir on /run is empty, shims and containers gone) and the boot id
// recorded in the journal dir is another boot's.
func rebootScenario(t *testing.T, dir string) []string {
	h := newHarness(t, newFakeRuntime(), dir)
	a := h.create("a")
	h.exec(a, "e1")
	h.kill(h.exec(a, "e2"), 0)
	h.expect("start-container a", "start-process a e1", "start-process a e2", "exit a e2 0")
	c := h.create("c")
	h.kill(c.proc("init"), 3)
	h.expect("start-container c", "exit c init 3")
	h.create("b")
	h.expect("start-container b")
	before := []string{"start-container a", "start-process a e1", "start-process a e2", "exit a e2 0",
		"start-container c", "exit c init 3", "start-container b"}
	must(t, h.s.Stop())
	simulateReboot(t, dir)
	return before
}

func simulateReboot(t *testing.T, dir string) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(dir, bootIDFile), []byte("00000000-0000-0000-0000-000000000000\n"), 0o600))
}

// TestRebootExitsLostContainersOnce: after a reboot each container the
// journal says was running gets one exit 255, its open execs first, and
// none again at later starts, also when the daemon died after journaling
// them but before recording the boot (crash-safe).
func TestRebootExitsLostContainersOnce(t *testing.T) {
	dir := t.TempDir()
	before := rebootScenario(t, dir)
	after := append(before, "exit a e1 255", "exit a init 255", "exit b init 255")

	h := newHarness(t, newFakeRuntime(), dir)
	h.expect(after...)
	assertNoMore(t, h)
	must(t, h.s.Stop())

	// Same boot: nothing new.
	h = newHarness(t, newFakeRuntime(), dir)
	h.expect(after...)
	if n := len(storedEvents(t, h.s)); n != len(after) {
		t.Fatalf("%d events after a restart in the same boot, want %d", n, len(after))
	}
	must(t, h.s.Stop())

	// The exits were journaled but the boot id not recorded (a crash in
	// between): the next start finds them in the journal.
	simulateReboot(t, dir)
	h = newHarness(t, newFakeRuntime(), dir)
	h.expect(after...)
	if n := len(storedEvents(t, h.s)); n != len(after) {
		t.Fatalf("%d events after a crash between the exits and the boot id, want %d", n, len(after))
	}
}
