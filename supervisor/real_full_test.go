package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"github.com/evjournal/containerd/specs"
	"github.com/evjournal/containerd/supervisor/journal"
)

// collector follows a subscription in the background.
type collector struct {
	mu   sync.Mutex
	evs  []journal.Event
	more chan struct{} // closed and renewed at each event
	err  error
}

func collect(sub *Subscription) *collector {
	c := &collector{more: make(chan struct{})}
	go func() {
		for {
			ev, err := sub.Next(context.Background())
			c.mu.Lock()
			if err != nil {
				c.err = err
			} else {
				c.evs = append(c.evs, ev)
			}
			close(c.more)
			c.more = make(chan struct{})
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return c
}

// waitFor waits until cond holds for the events so far.
func (c *collector) waitFor(t *testing.T, what string, cond func([]journal.Event) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		c.mu.Lock()
		ok, more, err := cond(c.evs), c.more, c.err
		c.mu.Unlock()
		if ok {
			return
		}
		if err != nil {
			t.Fatalf("%s: subscription ended: %v", what, err)
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("%s: not within 30s", what)
		}
	}
}

func (c *collector) events() []journal.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]journal.Event(nil), c.evs...)
}

// initExits counts the init exits of each container in evs.
func initExits(evs []journal.Event) map[string]int {
	n := map[string]int{}
	for _, ev := range evs {
		if ev.Type == journal.TypeExit && ev.Pid == "init" {
			n[ev.ID]++
		}
	}
	return n
}

// TestRealJournalFull runs real containers under runc with the journal on
// a 256 KiB tmpfs that fills up under a load of creates, execs and exits:
// every call is answered with a success or a clear error, the degraded state
// shows in the metric, nothing is published live that a later replay lacks,
// and once space is freed (no restart) every exit of the meantime appears
// exactly once.
func TestRealJournalFull(t *testing.T) {
	env := newRealEnv(t)
	jdir := fixture.SmallTmpfs(t, "256k")
	cfg := env.config()
	cfg.JournalDir = jdir
	s := env.start(cfg)
	sub, err := s.Subscribe(context.Background(), SubscribeRequest{After: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	live := collect(sub)
	ctx := context.Background()
	create := func(name string) (ContainerInfo, error) {
		return s.CreateContainer(ctx, CreateRequest{ID: env.id(name), Bundle: fixture.NewBundle(t, fixture.Args("sleep", "forever")).Path})
	}
	var started []string // ids whose create succeeded
	for _, name := range []string{"a0", "a1", "a2"} {
		if _, err := create(name); err != nil {
			t.Fatal(err)
		}
		started = append(started, env.id(name))
	}
	execSleep(t, s, env.id("a0"), "x0")

	filler := fixture.FillFS(t, jdir)
	// A load of creates and execs until the journal refuses each of them.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				info, err := create(fmt.Sprintf("b%d-%d", g, i))
				if err != nil {
					journalErrorCheck(t, err, jdir)
					return
				}
				mu.Lock()
				started = append(started, info.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100; i++ {
			if _, err := s.Exec(ctx, ExecRequest{ID: env.id("a0"), Pid: fmt.Sprintf("y%d", i), Spec: execSpec()}); err != nil {
				journalErrorCheck(t, err, jdir)
				return
			}
		}
	}()
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if gaugeValue(t, s, "journal-degraded") != 1 {
		t.Fatal("journal-degraded is not 1 while the disk is full")
	}
	// Exits while full.
	for _, name := range []string{"a1", "a2"} {
		if err := s.Signal(ctx, env.id(name), "init", syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	waitGaugeAtLeast(t, s, "journal-held-events", 2)
	for _, ev := range live.events() {
		if ev.Type == journal.TypeExit && (ev.ID == env.id("a1") || ev.ID == env.id("a2")) {
			t.Fatalf("exit published while the journal is full: %+v", ev)
		}
	}

	// Space comes back: the held events are journaled and published
	// without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	live.waitFor(t, "a1 and a2 exits after space is freed", func(evs []journal.Event) bool {
		n := initExits(evs)
		return n[env.id("a1")] == 1 && n[env.id("a2")] == 1
	})
	waitGauge(t, s, "journal-degraded", 0)

	// Stop every container still running; each start gets one exit.
	infos, err := s.State(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if err := s.Signal(ctx, info.ID, "init", syscall.SIGKILL); err != nil && !errors.Is(err, ErrContainerNotFound) {
			t.Fatal(err)
		}
	}
	live.waitFor(t, "every started container's exit", func(evs []journal.Event) bool {
		n := initExits(evs)
		for _, ev := range evs {
			if ev.Type == journal.TypeStartContainer && n[ev.ID] != 1 {
				return false
			}
		}
		return true
	})
	got := live.events()
	for id, n := range initExits(got) {
		if n != 1 {
			t.Errorf("container %s: %d exits", id, n)
		}
	}
	for _, id := range started {
		if initExits(got)[id] != 1 {
			t.Errorf("container %s (create succeeded): no exit", id)
		}
	}
	assertStoredEqual(t, storedEvents(t, s), got)
}

func execSpec() specs.ProcessSpec {
	return specs.ProcessSpec{Args: []string{"/testinit", "sleep", "forever"}, Cwd: "/", Env: []string{"PATH=/"}}
}

func waitGaugeAtLeast(t *testing.T, s *Supervisor, name string, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for gaugeValue(t, s, name) < want {
		if time.Now().After(deadline) {
			t.Fatalf("gauge %s = %d, want at least %d", name, gaugeValue(t, s, name), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
