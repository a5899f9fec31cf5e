// Package runtime models the daemon's side of a container: a Container (one
// incarnation of an id) and its Processes (init and execs), each run by one
// containerd-shim (see docs/shim-contract.md), with their state on disk so that
// a restarted daemon can Load them again without asking runc.
//
// Layout under the daemon's state dir (Root):
//
//	Root/<id>/state.json                  the container record (stateFile)
//	Root/<id>/<pid>/...                   one dir per process, shared with its shim
//	Root/.retired/<id>.<incarnation>/     a container whose init has exited
//	Root/.aside/<id>.<time>/              unloadable state, kept with a reason.txt
//	                                      (the newest few: PruneAside)
//
// A Container is safe for concurrent use: the supervisor's loop reads it
// while workers create and exec. Every state file is written through
// writeFileAtomic. The runc calls the daemon makes directly (start, delete,
// pause, resume, state, ps, update, events --stats, checkpoint) go through
// go-runc; runc failures come back as *RuncError.
package runtime
