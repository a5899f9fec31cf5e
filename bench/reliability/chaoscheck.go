package reliability

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bench/internal/harness"
)

// view is what the daemon says: its journal and its listing.
type view struct {
	exits     map[procKey][]uint32
	starts    map[procKey]bool // start-container (as init) and start-process
	listed    map[procKey]int  // host pid of each listed process
	listedCtr map[string]bool
	gaps      int
}

func (c *chaosRun) read() (view, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs, err := harness.StoredEvents(ctx, c.d.Client)
	if err != nil {
		return view{}, fmt.Errorf("stored-only replay: %w", err)
	}
	v := view{exits: map[procKey][]uint32{}, starts: map[procKey]bool{}, listed: map[procKey]int{}, listedCtr: map[string]bool{}}
	for i, ev := range evs {
		if i > 0 && ev.Seq != evs[i-1].Seq+1 {
			v.gaps++
		}
		switch ev.Type {
		case "exit":
			k := procKey{ev.Id, ev.Pid}
			v.exits[k] = append(v.exits[k], ev.Status)
		case "start-container":
			v.starts[procKey{ev.Id, "init"}] = true
		case "start-process":
			v.starts[procKey{ev.Id, ev.Pid}] = true
		}
	}
	st, err := c.d.Client.State(ctx, &types.StateRequest{})
	if err != nil {
		return view{}, fmt.Errorf("state: %w", err)
	}
	for _, x := range st.GetContainers() {
		v.listedCtr[x.Id] = true
		for _, p := range x.GetProcesses() {
			v.listed[procKey{x.Id, p.Pid}] = int(p.SystemPid)
		}
	}
	return v, nil
}

// check compares the model with the daemon's view until nothing is
// undecided or grace runs out; then counts what is still wrong, and looks
// for orphan shims, zombies and unreadable journal lines.
func (c *chaosRun) check(grace time.Duration, final bool) error {
	deadline := time.Now().Add(grace)
	var v view
	for {
		var err error
		v, err = c.read()
		last := time.Now().After(deadline)
		if err != nil {
			if last {
				c.unreadable++
				c.s.cfg.Logf("chaos: after kill %d: %v", c.kills, err)
				return nil
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if c.judge(v, last) == 0 || last {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.seqGaps = max(c.seqGaps, v.gaps)
	c.checkShims()
	c.checkZombies()
	c.checkJournalFile()
	return nil
}

// once runs f the first time a violation of kind is found for key.
func (c *chaosRun) once(kind string, key procKey, f func()) {
	k := kind + " " + key.String()
	if !c.counted[k] {
		c.counted[k] = true
		f()
	}
}

// judge returns how many processes are still undecided; when last, those
// count as violations.
func (c *chaosRun) judge(v view, last bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	undecided := 0
	logf := c.s.cfg.Logf
	for key, p := range c.procs {
		exits := v.exits[key]
		if len(exits) > 1 {
			c.once("dup", key, func() { c.dups += len(exits) - 1; logf("chaos: %s has %d exits %v", key, len(exits), exits) })
		}
		if p.state == failedRPC && (len(exits) > 0 || v.starts[key]) {
			c.once("phantom", key, func() { c.phantoms++; logf("chaos: %s was refused but appears in the journal", key) })
		}
		if len(exits) > 0 {
			if p.state == uncertain {
				// Its start was cut short by a crash: the daemon may have
				// found it created but never started, and then 255 (status
				// unknowable) is the honest answer.
				p.state = started
				p.allowed[255] = true
				p.wasUncertain = true
			}
			if !p.exited && p.wasUncertain && exits[0] == 255 {
				c.unknown++
			}
			p.exited = true
			if !p.allowed[exits[0]] {
				c.once("wrong", key, func() {
					c.wrong++
					logf("chaos: %s exited %d, want one of %v (start acknowledged: %v, start event: %v)", key, exits[0], keys(p.allowed), !p.wasUncertain, v.starts[key])
				})
			}
			if _, ok := v.listed[key]; ok {
				undecided++
				if last {
					c.once("listed-after-exit", key, func() { c.listedDead++; logf("chaos: %s still listed after its exit", key) })
				}
			}
			continue
		}
		if pid, ok := v.listed[key]; ok {
			if p.state == uncertain {
				p.state = started
				p.wasUncertain = true
				if p.pidfd < 0 {
					p.pidfd = openTestinit(pid)
				}
			}
			if !alive(p, pid) {
				undecided++
				if last {
					c.once("listed-dead", key, func() { c.listedDead++; logf("chaos: %s listed but its process %d is gone", key, pid) })
				}
			}
			continue
		}
		if p.state == started || (p.state == uncertain && v.starts[key]) {
			undecided++
			if last {
				c.once("lost", key, func() { c.lost++; logf("chaos: %s neither listed nor exited (lost exit)", key) })
			}
		}
	}
	return undecided
}

func keys(m map[uint32]bool) []uint32 {
	var out []uint32
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// alive reports whether a listed process still runs (its pidfd is not
// readable yet, or without one, its pid is there).
func alive(p *proc, pid int) bool {
	if p.pidfd >= 0 {
		fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err != nil || n == 0
	}
	return pid > 0 && harness.Alive(pid)
}

// checkShims counts shims under the state dir whose container the daemon
// does not list, once they have had 5 s to go.
func (c *chaosRun) checkShims() {
	deadline := time.Now().Add(5 * time.Second)
	for {
		listed := map[string]bool{}
		st, err := c.d.Client.State(context.Background(), &types.StateRequest{})
		if err != nil {
			return
		}
		for _, x := range st.GetContainers() {
			listed[x.Id] = true
		}
		var orphans []harness.Proc
		for _, sh := range c.s.env.Shims(c.d.StateDir) {
			if id := harness.ShimContainer(c.d.StateDir, sh); id == "" || !listed[id] {
				orphans = append(orphans, sh)
			}
		}
		if len(orphans) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.mu.Lock()
			for _, sh := range orphans {
				c.once("orphan", procKey{fmt.Sprint(sh.Pid), ""}, func() {
					c.orphans++
					c.s.cfg.Logf("chaos: orphan shim %d %v (cwd %s)", sh.Pid, sh.Args, sh.Cwd)
				})
			}
			c.mu.Unlock()
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkZombies counts zombie children of the daemon (and of this process)
// that are still there half a second later.
func (c *chaosRun) checkZombies() {
	first := map[int]bool{}
	for _, pid := range append(harness.ZombieChildren(c.d.Pid()), harness.ZombieChildren(os.Getpid())...) {
		first[pid] = true
	}
	if len(first) == 0 {
		return
	}
	time.Sleep(500 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pid := range append(harness.ZombieChildren(c.d.Pid()), harness.ZombieChildren(os.Getpid())...) {
		if first[pid] {
			c.once("zombie", procKey{fmt.Sprint(pid), ""}, func() { c.zombies++; c.s.cfg.Logf("chaos: zombie %d", pid) })
		}
	}
}

func (c *chaosRun) checkJournalFile() {
	if n := badJournalLines(c.d.StateDir); n > c.fileBad {
		c.s.cfg.Logf("chaos: after kill %d, %d journal lines do not decode", c.kills, n)
		c.fileBad = n
	}
}
