package reliability

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/evjournal/containerd/api/types"
	"github.com/evjournal/containerd/bench/internal/harness"
)

// hostPaths are the host files and directories that hostile requests name:
// a regular file, a symlink to it, a directory, a checkpoint-like directory
// this daemon did not write, and a segment of the daemon's own journal. All
// but the journal live in one directory outside the daemon's, whose every
// entry is recorded before the table runs: afterwards nothing in it may be
// written, truncated, created or removed, and the journal segment must be
// the same file, not shorter (docs/design.md, "Client-named paths").
type hostPaths struct {
	dir                  string
	file, link, subdir   string
	foreignCP            string // <dir>/checkpoints, holding "cp" without this daemon's marker
	linkBundle           string // a bundle whose config.json is a symlink to file
	journal              string // "" when no segment was found
	journalIno, journalN uint64
	before               map[string]string // entry -> facts
}

func newHostPaths(env *harness.Env, d *harness.Daemon) (*hostPaths, error) {
	h := &hostPaths{dir: env.Path("host")}
	h.file, h.link, h.subdir = filepath.Join(h.dir, "secret"), filepath.Join(h.dir, "link"), filepath.Join(h.dir, "dir")
	h.foreignCP, h.linkBundle = filepath.Join(h.dir, "checkpoints"), filepath.Join(h.dir, "bundle")
	for _, dir := range []string{h.subdir, filepath.Join(h.foreignCP, "cp"), h.linkBundle} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	for path, data := range map[string]string{h.file: "host secret\n", filepath.Join(h.foreignCP, "cp", "keep"): "not a checkpoint of this daemon\n"} {
		if err := os.WriteFile(path, []byte(data), 0o640); err != nil {
			return nil, err
		}
	}
	if err := os.Symlink(h.file, h.link); err != nil {
		return nil, err
	}
	if err := os.Symlink(h.file, filepath.Join(h.linkBundle, "config.json")); err != nil {
		return nil, err
	}
	h.journal = journalSegment(d)
	h.journalIno, h.journalN = inodeSize(h.journal)
	var err error
	h.before, err = treeFacts(h.dir)
	return h, err
}

// journalSegment is a segment file of d's journal, wherever its journal
// dir is (the state dir or a dir beside it).
func journalSegment(d *harness.Daemon) string {
	var found string
	filepath.WalkDir(d.Dir, func(path string, e fs.DirEntry, err error) error {
		if err == nil && found == "" && e.Type().IsRegular() && strings.HasPrefix(e.Name(), "seg-") && strings.HasSuffix(e.Name(), ".log") {
			found = path
		}
		return nil
	})
	return found
}

func inodeSize(path string) (ino, size uint64) {
	var st syscall.Stat_t
	if path == "" || syscall.Stat(path, &st) != nil {
		return 0, 0
	}
	return st.Ino, uint64(st.Size)
}

// treeFacts maps every entry under dir to its type, mode, size, mtime and
// content hash (or link target).
func treeFacts(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		facts := fmt.Sprintf("%v size %d mtime %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.IsDir():
			// Its entries are listed; its mtime moves when a failed
			// checkpoint's dirs are made and removed again, as they must.
			facts = fi.Mode().String()
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			facts += " sha256 " + hex.EncodeToString(sum[:8])
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(path)
			facts += " -> " + target
		}
		out[path] = facts
		return nil
	})
	return out, err
}

// changes lists what differs from the recording: any host entry changed,
// added or removed, and a journal segment replaced or cut.
func (h *hostPaths) changes() []string {
	after, err := treeFacts(h.dir)
	if err != nil {
		return []string{fmt.Sprintf("host dir unreadable: %v", err)}
	}
	var out []string
	for path, was := range h.before {
		if now, ok := after[path]; !ok {
			out = append(out, "host entry removed: "+path)
		} else if now != was {
			out = append(out, fmt.Sprintf("host entry %s changed: %s, now %s", path, was, now))
		}
	}
	for path := range after {
		if _, ok := h.before[path]; !ok {
			out = append(out, "host entry created: "+path)
		}
	}
	if h.journal != "" {
		if ino, size := inodeSize(h.journal); ino != h.journalIno || size < h.journalN {
			out = append(out, fmt.Sprintf("journal segment %s: inode %d size %d, was inode %d size %d", h.journal, ino, size, h.journalIno, h.journalN))
		}
	}
	sort.Strings(out)
	return out
}

// table is the requests that name host paths, flood the labels, or name a
// runtime that fails at once (/bin/false, a missing binary), each with a
// fresh id.
func (h *hostPaths) table(good, victim string, uniq func(string) string) []badCase {
	var t []badCase
	add := func(rpc, name string, want []codes.Code, call func(context.Context, types.APIClient) error) {
		t = append(t, badCase{rpc: rpc, name: name, want: want, call: call})
	}
	seq := 0
	fresh := func() string { seq++; return uniq(fmt.Sprintf("host-%d", seq)) }
	create := func(name string, want []codes.Code, edit func(r *types.CreateContainerRequest)) {
		add("CreateContainer", name, want, func(ctx context.Context, c types.APIClient) error {
			r := &types.CreateContainerRequest{Id: fresh(), BundlePath: good}
			edit(r)
			_, err := c.CreateContainer(ctx, r)
			return err
		})
	}
	addExec := func(name string, want []codes.Code, edit func(r *types.AddProcessRequest)) {
		add("AddProcess", name, want, func(ctx context.Context, c types.APIClient) error {
			r := execReq(victim, fresh(), "sleep", "forever")
			edit(r)
			_, err := c.AddProcess(ctx, r)
			return err
		})
	}
	outputs := map[string]string{"an existing host file": h.file, "a symlink": h.link, "a directory": h.subdir}
	if h.journal != "" {
		outputs["the daemon's journal"] = h.journal
	}
	for what, path := range outputs {
		create("stdout "+what, invalid, func(r *types.CreateContainerRequest) { r.Stdout = path })
		create("stderr "+what, invalid, func(r *types.CreateContainerRequest) { r.Stderr = path })
		addExec("stdout "+what, invalid, func(r *types.AddProcessRequest) { r.Stdout = path })
		addExec("stderr "+what, invalid, func(r *types.AddProcessRequest) { r.Stderr = path })
	}
	create("stdin a directory", invalid, func(r *types.CreateContainerRequest) { r.Stdin = h.subdir })
	create("config.json a symlink to a host file", invalid, func(r *types.CreateContainerRequest) { r.BundlePath = h.linkBundle })
	create("1.9 million empty labels", invalid, func(r *types.CreateContainerRequest) { r.Labels = make([]string, 1_900_000) })
	create("labels of 3 MiB", invalid, func(r *types.CreateContainerRequest) {
		r.Labels = []string{strings.Repeat("l", 3<<20)}
	})
	create("runtime that fails at once", failed, func(r *types.CreateContainerRequest) { r.Runtime = "/bin/false" })
	add("DeleteCheckpoint", "checkpoint dir outside, not ours", failed, func(ctx context.Context, c types.APIClient) error {
		_, err := c.DeleteCheckpoint(ctx, &types.DeleteCheckpointRequest{Id: victim, Name: "cp", CheckpointDir: h.foreignCP})
		return err
	})
	add("ListCheckpoint", "checkpoint dir outside", anyAnswer, func(ctx context.Context, c types.APIClient) error {
		_, err := c.ListCheckpoint(ctx, &types.ListCheckpointRequest{Id: victim, CheckpointDir: h.foreignCP})
		return err
	})
	// Without CRIU a checkpoint fails: the directories it made outside
	// the state dir must be gone again. With CRIU it would succeed and
	// rightly leave a checkpoint there, so the case is left out.
	if _, err := exec.LookPath("criu"); err != nil {
		add("CreateCheckpoint", "failing, in a new dir outside", failed, func(ctx context.Context, c types.APIClient) error {
			_, err := c.CreateCheckpoint(ctx, &types.CreateCheckpointRequest{Id: victim,
				Checkpoint: &types.Checkpoint{Name: "cp2"}, CheckpointDir: filepath.Join(h.dir, "made", "deeper")})
			return err
		})
	}
	return t
}

// loadExits is the exec load running beside the bad-input table: short
// execs of the load containers, each of whose exit must be published once.
type loadExits struct {
	mu      sync.Mutex
	n       int
	started []string // "id/pid" of the execs that started; guarded by mu
}

func (l *loadExits) exec(ctx context.Context, d *harness.Daemon, id string) {
	l.mu.Lock()
	l.n++
	pid := fmt.Sprintf("x%d", l.n)
	l.mu.Unlock()
	if _, err := d.Client.AddProcess(ctx, execReq(id, pid, "exit", "3")); err != nil {
		return // e.g. the container was paused: not started, no exit expected
	}
	l.mu.Lock()
	l.started = append(l.started, id+"/"+pid)
	l.mu.Unlock()
}

// check waits (up to 15 s) for an exit of every started exec and returns
// those whose exit was not journaled exactly once with status 3.
func (l *loadExits) check(ctx context.Context, d *harness.Daemon) []string {
	want := map[string]bool{}
	for _, k := range l.started {
		want[k] = true
	}
	var seen map[string][]uint32
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		evs, err := harness.StoredEvents(ctx, d.Client)
		if err != nil {
			return []string{fmt.Sprintf("events: %v", err)}
		}
		seen = map[string][]uint32{}
		for _, ev := range evs {
			if k := ev.Id + "/" + ev.Pid; ev.Type == "exit" && want[k] {
				seen[k] = append(seen[k], ev.Status)
			}
		}
		if len(seen) == len(want) || time.Now().After(deadline) {
			break
		}
	}
	var bad []string
	for k := range want {
		if st := seen[k]; len(st) != 1 || st[0] != 3 {
			bad = append(bad, fmt.Sprintf("%s: exit statuses %v, want [3]", k, st))
		}
	}
	sort.Strings(bad)
	return bad
}

// timeState times a State of every container, in ms.
func timeState(d *harness.Daemon) (float64, error) {
	t0 := time.Now()
	_, err := d.Client.State(context.Background(), &types.StateRequest{})
	return float64(time.Since(t0)) / float64(time.Millisecond), err
}

// logAll logs each item with a prefix and returns how many there were.
func (s *Suite) logAll(prefix string, items []string) int {
	for _, it := range items {
		s.cfg.Logf("%s: %s", prefix, it)
	}
	return len(items)
}
