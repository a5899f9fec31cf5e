package runtime

import (
	"path/filepath"
	"sync"
)

// idLocks serialise, per Root/ID, the steps that decide who owns an id's runc
// state: New's mkdir + state.json, and Delete's "is Root/ID still mine?" check
// followed by its `runc delete`. Without it a Delete of a retired incarnation
// could check an empty Root/ID, then delete the runc state a new incarnation
// created meanwhile.
var idLocks = struct {
	mu sync.Mutex
	m  map[string]*idLock
}{m: map[string]*idLock{}}

type idLock struct {
	mu    sync.Mutex
	users int // guarded by idLocks.mu
}

// lockID locks root/id and returns the unlock function.
func lockID(root, id string) (unlock func()) {
	key := filepath.Join(root, id)
	idLocks.mu.Lock()
	l := idLocks.m[key]
	if l == nil {
		l = &idLock{}
		idLocks.m[key] = l
	}
	l.users++
	idLocks.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		idLocks.mu.Lock()
		if l.users--; l.users == 0 {
			delete(idLocks.m, key)
		}
		idLocks.mu.Unlock()
	}
}
