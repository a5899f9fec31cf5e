//go:build failpoints

package crashpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// armed is the point $CONTAINERD_CRI_CRASH names, read once at start.
var armed = parse(os.Getenv(Env))

type arm struct {
	point string
	nth   int // die at this hit (1 = the first)

	mu   sync.Mutex
	hits int
}

// parse reads "<point>" or "<point>#N"; an empty or malformed value arms
// nothing (a typo must not pass for a point never reached: the tests check
// that the daemon died).
func parse(v string) *arm {
	point, n, found := strings.Cut(v, "#")
	a := &arm{point: point, nth: 1}
	if found {
		nth, err := strconv.Atoi(n)
		if err != nil || nth < 1 {
			return &arm{}
		}
		a.nth = nth
	}
	return a
}

// reached counts a hit of point and reports whether it is the one to die at.
func (a *arm) reached(point string) bool {
	if a.point == "" || point != a.point {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hits++
	return a.hits == a.nth
}

// At SIGKILLs the process if point is the armed one. It says so on stderr
// first (the daemon's log), so that a test knows where the daemon died.
func At(point string) {
	if !armed.reached(point) {
		return
	}
	fmt.Fprintf(os.Stderr, "crashpoint: %s reached: SIGKILL\n", point)
	unix.Kill(os.Getpid(), unix.SIGKILL)
	select {} // the kill is on its way: this goroutine goes no further
}
