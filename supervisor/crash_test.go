//go:build failpoints

package supervisor

// The crash-at-each-step tests: they need the supervisor's test-only crash
// point (failpoint.go), so they are built with -tags failpoints (make test).

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/supervisor/journal"
)

// TestRestoreCrashAtEachStep crashes the restoring daemon after k events and
// restarts it: every exit is in the journal exactly once in the end.
func TestRestoreCrashAtEachStep(t *testing.T) {
	for k := 1; k <= 2; k++ {
		t.Run("", func(t *testing.T) {
			dir := t.TempDir()
			rt, _, _ := restoreScenario(t, dir)
			crashing := newFakeMonitor()
			s, err := New(Config{StateDir: dir, SyncPolicy: testSync, RuntimeImpl: rt, MonitorImpl: crashing, Clock: newFakeClock(),
				ReconcileInterval: -1})
			must(t, err)
			s.crash.crashAfter(k)
			must(t, s.Start(context.Background()))
			waitCrashed(t, s)
			must(t, s.Stop())
			s.waitWorkers()
			h := newHarness(t, rt, dir)
			h.expect("start-container a", "start-process a e1", "start-container b",
				"exit a e1 1", "exit a init 137")
			assertNoMore(t, h)
		})
	}
}

// waitCrashed waits until s froze itself at its crash point.
func waitCrashed(t *testing.T, s *Supervisor) {
	t.Helper()
	select {
	case <-s.crash.crashedCh:
	case <-time.After(20 * time.Second):
		t.Fatalf("the supervisor did not reach its crash point (%d events)", s.crash.after)
	}
}

func TestRealRestoreCrashAtEachStep(t *testing.T) {
	for k := 1; k <= 3; k++ {
		t.Run("", func(t *testing.T) {
			env := newRealEnv(t)
			daemonDeathScenario(t, env)
			crashing := env.startCrashing(env.config(), k)
			waitCrashed(t, crashing)
			crashing.Stop()
			crashing.waitWorkers() // a dead daemon leaves no rename or write behind it
			s3 := env.start(env.config())
			sub, err := s3.Subscribe(context.Background(), SubscribeRequest{After: time.Unix(0, 0)})
			if err != nil {
				t.Fatal(err)
			}
			got := nextEvents(t, env, sub, 7)
			assertExits(t, got[4:], "exit a e1 137", "exit a init 137", "exit b init 137")
			stored, err := s3.Subscribe(context.Background(), SubscribeRequest{After: time.Unix(0, 0), StoredOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			exits := 0
			var all []string
			for {
				ev, err := stored.Next(context.Background())
				if err != nil {
					break
				}
				all = append(all, fmt.Sprintf("%s inc=%s", env.short(describe(ev)), ev.Incarnation))
				if ev.Type == journal.TypeExit {
					exits++
				}
			}
			if exits != 3 {
				t.Fatalf("journal holds %d exits, want exactly 3: %q", exits, all)
			}
			if err := s3.Signal(context.Background(), env.id("c"), "init", syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if ev := nextEvents(t, env, sub, 1)[0]; ev != "exit c init 137" {
				t.Fatalf("got %q", ev)
			}
		})
	}
}

// startCrashing starts a supervisor that freezes after its k-th event.
func (env *realEnv) startCrashing(cfg Config, k int) *Supervisor {
	env.t.Helper()
	s, err := New(cfg)
	if err != nil {
		env.t.Fatal(err)
	}
	s.crash.crashAfter(k)
	if err := s.Start(context.Background()); err != nil {
		env.t.Fatal(err)
	}
	env.t.Cleanup(func() { s.Stop() })
	return s
}
