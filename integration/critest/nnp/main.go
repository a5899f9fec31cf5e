// Command nnp prints its effective uid, for the nonewprivs image of critest's
// NoNewPrivs specs: installed setuid root, it runs with euid 0 unless the
// container has no_new_privs set (then the setuid bit is ignored and it
// keeps the uid the container runs as).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("Effective uid: %d\n", os.Geteuid())
}
