package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/internal/crashpoint"
	"github.com/evjournal/containerd/supervisor/objects"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// At start the records are reconciled with the loop's objects, which the
// supervisor's restore brought up to date with what really runs:
//
//   - a record without an object is a pod or container whose creation the
//     daemon did not finish (it crashed before the object was committed):
//     everything it made is undone (network, IP lease, netns, shm, rootfs,
//     dirs; a pause process, if one runs, is killed);
//   - an object without a record is a removal the daemon did not finish
//     (the record dir is retired whole, first): it is finished, and what
//     the retired dir still held is removed;
//   - a dir whose record is missing while its object is there is the same,
//     cut short by a daemon that removed a dir file by file: finished too;
//   - a prepared rootfs that no record names is removed;
//   - a created container's rootfs is mounted again (after a reboot);
//   - the exec dirs (output FIFOs) of calls the crash cut short are removed.

// load reads the records and reconciles them.
func (s *Server) load(ctx context.Context) error {
	badSandboxes, err := s.loadSandboxes()
	if err != nil {
		return err
	}
	badContainers, err := s.loadContainers()
	if err != nil {
		return err
	}
	objs, err := s.objectMap(ctx)
	if err != nil {
		return fmt.Errorf("cri: objects: %w", err)
	}
	if objs, err = s.importLegacy(ctx, objs); err != nil {
		return err
	}
	s.reconcileContainers(ctx, objs, badContainers)
	s.reconcileSandboxes(ctx, objs, badSandboxes)
	s.finishRemovals(ctx, objs)
	s.removeOrphanRootfs()
	s.sweepRemoving()
	s.sweepExecDirs()
	return nil
}

// sweepExecDirs removes <state>/exec/*: each is the FIFO dir of an exec
// call of a daemon that is gone (no call is served yet). A shim still
// writing to one holds its FIFOs open; the paths are not needed for that.
func (s *Server) sweepExecDirs() {
	dir := filepath.Join(s.cfg.StateDir, "exec")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.log.WithError(err).Warn("cri: read the exec dir")
		}
		return
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			s.log.WithError(err).WithField("dir", e.Name()).Warn("cri: remove the dir of an exec call cut short")
		}
	}
}

func (s *Server) loadSandboxes() (map[string]error, error) {
	recs, bad, err := loadRecords[sandboxRecord](filepath.Join(s.cfg.Root, "sandboxes"), "sandbox.json")
	if err != nil {
		return nil, fmt.Errorf("cri: load pods: %w", err)
	}
	for _, rec := range recs {
		cfg := &runtimeapi.PodSandboxConfig{}
		if err := unmarshalProto(rec.Config, cfg); err != nil {
			bad[rec.ID] = err
			continue
		}
		sb, err := newSandbox(rec, cfg, s.sandboxDir(rec.ID))
		if err != nil {
			s.log.WithError(err).WithField("sandbox", rec.ID).Warn("cri: the pod's recorded resources cannot be read; none reported")
		}
		s.recs.addSandbox(sb)
	}
	return bad, nil
}

func (s *Server) loadContainers() (map[string]error, error) {
	recs, bad, err := loadRecords[containerRecord](filepath.Join(s.cfg.Root, "containers"), "container.json")
	if err != nil {
		return nil, fmt.Errorf("cri: load containers: %w", err)
	}
	for _, rec := range recs {
		cfg := &runtimeapi.ContainerConfig{}
		if err := unmarshalProto(rec.Config, cfg); err != nil {
			bad[rec.ID] = err
			continue
		}
		c, err := newContainer(rec, cfg, s.containerDir(rec.ID))
		if err != nil {
			s.log.WithError(err).WithField("container", rec.ID).Warn("cri: the container's recorded resources cannot be read; its config's reported")
		}
		s.recs.addContainer(c)
	}
	return bad, nil
}

// importLegacy hands the lifecycle kept in old records to the loop, once.
func (s *Server) importLegacy(ctx context.Context, objs map[string]objects.Object) (map[string]objects.Object, error) {
	var imp []objects.Object
	for _, sb := range s.recs.allSandboxes() {
		if o, ok := legacySandboxObject(sb); ok && objs[sb.rec.ID].ID == "" {
			imp = append(imp, o)
		}
	}
	for _, c := range s.recs.allContainers() {
		if o, ok := legacyContainerObject(c); ok && objs[c.rec.ID].ID == "" {
			imp = append(imp, o)
		}
	}
	if len(imp) == 0 {
		return objs, nil
	}
	n, err := s.sup.ImportObjects(ctx, imp)
	if err != nil {
		return nil, fmt.Errorf("cri: import the lifecycle of old records: %w", err)
	}
	s.log.WithField("objects", n).Info("cri: imported the lifecycle kept in the records of an older daemon")
	return s.objectMap(ctx)
}

func (s *Server) reconcileContainers(ctx context.Context, objs map[string]objects.Object, bad map[string]error) {
	for _, c := range s.recs.allContainers() {
		if objs[c.rec.ID].ID != "" {
			if objs[c.rec.ID].State == objects.Created {
				s.remountRootfs(c.rec.ID)
			}
			continue
		}
		s.log.WithField("container", c.rec.ID).Warn("cri: container whose creation did not finish: removing what it made")
		s.discardContainer(c.rec.ID)
	}
	s.settleUnreadable("container", "container", objs, bad, s.discardContainer)
}

// settleUnreadable handles the record dirs of one kind whose record could
// not be read (bad, by id; field and kind name them in the log). A dir
// whose object the loop does not have is a creation cut short, and one
// whose record is missing while its object exists a removal cut short (an
// older daemon's, which removed the files one by one): both are discarded.
// A damaged record of an object the daemon has is left in place, logged.
func (s *Server) settleUnreadable(field, kind string, objs map[string]objects.Object, bad map[string]error, discard func(id string)) {
	for id, err := range bad {
		log := s.log.WithField(field, id)
		switch {
		case objs[id].ID == "":
			log.WithError(err).Warnf("cri: %s dir without a record (creation cut short): removing what it made", kind)
		case removalCutShort(err):
			log.Warnf("cri: %s dir whose record a removal took (an older daemon's, cut short): finishing the removal", kind)
		default:
			log.WithError(err).Errorf("cri: record unreadable for a %s the daemon has; left in place", kind)
			continue
		}
		discard(id)
	}
}

// discardContainer removes a container that never became visible.
func (s *Server) discardContainer(id string) {
	if err := s.cfg.Images.RemoveRootfs(id); err != nil {
		s.log.WithError(err).WithField("container", id).Error("cri: remove the rootfs of an unfinished container")
		return
	}
	if err := s.removeRecordDir(s.containerDir(id)); err != nil {
		s.log.WithError(err).WithField("container", id).Error("cri: remove the dir of an unfinished container")
		return
	}
	s.recs.remove(id)
}

func (s *Server) remountRootfs(id string) {
	if _, err := s.cfg.Images.MountRootfs(id); err != nil {
		s.log.WithError(err).WithField("container", id).Warn("cri: cannot mount the rootfs of a created container again; its start will fail")
	}
}

func (s *Server) reconcileSandboxes(ctx context.Context, objs map[string]objects.Object, bad map[string]error) {
	for _, sb := range s.recs.allSandboxes() {
		if objs[sb.rec.ID].ID != "" {
			continue
		}
		s.log.WithField("sandbox", sb.rec.ID).Warn("cri: pod whose creation did not finish: tearing down what it made")
		s.discardSandbox(ctx, sb.rec.ID, sb.rec.NetNS, sb.rec.Shm)
	}
	s.settleUnreadable("sandbox", "pod", objs, bad, func(id string) { s.discardSandbox(ctx, id, s.netnsPath(id), s.shmPath(id)) })
}

// removalCutShort says whether a dir's record is missing, not damaged,
// for an object the loop has. The record is written before its object
// exists, and only a removal deletes it: daemons before record dirs were
// retired whole (store.go) removed the dir's files one by one, record
// among them, so their crash could leave such a dir. Its removal is
// finished: the object's by finishRemovals.
func removalCutShort(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// discardSandbox undoes a pod that never became visible; the paths it may
// have made are derived from its id when no record names them.
func (s *Server) discardSandbox(ctx context.Context, id, netns, shm string) {
	log := s.log.WithField("sandbox", id)
	s.killUnknown(ctx, id)
	if err := s.teardownNetwork(ctx, id, netns); err != nil {
		log.WithError(err).Error("cri: tear down the network of an unfinished pod; left for the next start")
		return
	}
	if err := s.host.UnmountShm(shm); err != nil {
		log.WithError(err).Error("cri: unmount the /dev/shm of an unfinished pod")
		return
	}
	if err := s.cfg.Images.RemoveRootfs(id); err != nil {
		log.WithError(err).Error("cri: remove the rootfs of an unfinished pod")
		return
	}
	if err := s.removeRecordDir(s.sandboxDir(id)); err != nil {
		log.WithError(err).Error("cri: remove the dir of an unfinished pod")
		return
	}
	s.recs.remove(id)
}

// killUnknown kills a process the supervisor runs as id that no object
// describes (an older daemon's pause started before its record said so).
func (s *Server) killUnknown(ctx context.Context, id string) {
	if !s.running(ctx, id) {
		return
	}
	if err := s.killAndWait(ctx, id, "init"); err != nil {
		s.log.WithError(err).WithField("id", id).Error("cri: kill a process no object describes")
	}
}

// teardownNetwork undoes CNI ADD and removes the netns pin. The network
// decides whether anything is left to undo (an ADD whose DEL has not run:
// after a reboot the pin is gone but the IP lease is not); once the DEL ran
// and the pin is gone, a second call does nothing.
func (s *Server) teardownNetwork(ctx context.Context, id, netns string) error {
	if netns == "" {
		return nil
	}
	if s.cfg.Network != nil {
		if err := s.cfg.Network.Teardown(ctx, id, netns); err != nil {
			return fmt.Errorf("tear the network down: %w", err)
		}
		crashpoint.At("network-down:after-cni-del")
	}
	if err := s.host.RemoveNetNS(netns); err != nil {
		return err
	}
	return nil
}

// finishRemovals completes the removal of objects whose record is gone.
func (s *Server) finishRemovals(ctx context.Context, objs map[string]objects.Object) {
	for id, o := range objs {
		if sb, c := s.recs.lookup(id); sb != nil || c != nil {
			continue
		}
		log := s.log.WithField("id", id).WithField("kind", o.Kind)
		if o.State == objects.Running {
			log.Warn("cri: an object without a record runs: killing it")
			if err := s.killAndWait(ctx, id, "init"); err != nil {
				log.WithError(err).Error("cri: kill an object without a record")
				continue
			}
		}
		if err := s.sup.RemoveObject(ctx, id); err != nil {
			log.WithError(err).Error("cri: finish the removal of an object whose record is gone")
			continue
		}
		log.Info("cri: finished a removal cut short")
	}
}

// removeOrphanRootfs removes the prepared rootfs that no record names (a
// create cut short after the rootfs, before the record).
func (s *Server) removeOrphanRootfs() {
	for _, r := range s.cfg.Images.ListRootfs() {
		if sb, c := s.recs.lookup(r.ContainerID); sb != nil || c != nil {
			continue
		}
		s.log.WithField("id", r.ContainerID).Warn("cri: prepared rootfs of no pod or container: removing it")
		if err := s.cfg.Images.RemoveRootfs(r.ContainerID); err != nil {
			s.log.WithError(err).WithField("id", r.ContainerID).Error("cri: remove an orphan rootfs")
		}
	}
}

// killAndWait SIGKILLs process pid of id and waits for its exit.
func (s *Server) killAndWait(ctx context.Context, id, pid string) error {
	exits, stop, err := s.sup.WatchExit(ctx, id, pid)
	if err != nil {
		return err
	}
	defer stop()
	if err := s.sup.Signal(ctx, id, pid, syscall.SIGKILL); err != nil && !errdefs.IsNotFound(err) && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: kill: %w", id, err)
	}
	if !s.running(ctx, id) && pid == "init" {
		return nil
	}
	_, err = awaitExit(ctx, exits, stopWait)
	return err
}
