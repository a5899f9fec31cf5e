// Command pause holds a pod sandbox's namespaces: it is the first process in
// them and does nothing until it is told to stop, so the namespaces live as
// long as the pod, not as long as its containers.
//
// As PID 1 of the pod's PID namespace it is the parent of every orphan there
// and reaps them, so exited processes do not pile up as zombies. SIGINT and
// SIGTERM end it with status 0; other signals that would end a Go program
// are ignored, as init ignores signals it has no handler for.
//
// It needs no image: the CRI service runs this static binary from the host.
package main

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

func main() {
	signal.Ignore(unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGPIPE,
		unix.SIGALRM, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU)
	// Two channels, one slot each: os/signal drops a signal whose channel
	// is full, which is harmless for a second SIGCHLD (one reap collects
	// every exit) but must never happen to a stop behind a burst of them.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, unix.SIGINT, unix.SIGTERM)
	child := make(chan os.Signal, 1)
	signal.Notify(child, unix.SIGCHLD)
	// Children that exited before the handler was installed.
	reap()
	// Blocked here the process sleeps: no timers, no allocation, so no
	// garbage collection and no goroutine waking up.
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-child:
			reap()
		}
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
