package monitor

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"golang.org/x/sys/unix"
)

// BenchmarkExitLatency measures, over 1000 children per iteration, the time
// from a child's last act (testinit's `stamp`: print "STAMP <unix ns>" to its
// stdout, the monitored pipe, then exit) to the receipt of its exit. inflight
// is how many children run at once.
//
// Most of that time is the child's own exit (every thread of its Go runtime
// must die before its fds are closed), so each case also runs as "floor": the
// same children waited for by a bare epoll_wait on a locked thread, no monitor
// and no channel. The monitor's cost is the difference.
func BenchmarkExitLatency(b *testing.B) {
	testinit := fixture.Testinit(b)
	for _, inflight := range []int{1, 8} {
		b.Run(fmt.Sprintf("floor/inflight=%d", inflight), func(b *testing.B) {
			benchLatency(b, testinit, inflight, newFloorWaiter)
		})
		b.Run(fmt.Sprintf("monitor/inflight=%d", inflight), func(b *testing.B) {
			benchLatency(b, testinit, inflight, func(b *testing.B, n int) waiter {
				return newMonitorWaiter(b, newMonitor(b), n)
			})
		})
	}
}

const childrenPerOp = 1000

func benchLatency(b *testing.B, testinit string, inflight int, newWaiter func(*testing.B, int) waiter) {
	var lat []time.Duration
	for b.Loop() {
		w := newWaiter(b, childrenPerOp)
		lat = append(lat, runStampers(b, w, testinit, childrenPerOp, inflight)...)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 50)), "p50-ns")
	b.ReportMetric(float64(percentile(lat, 99)), "p99-ns")
	b.ReportMetric(float64(lat[len(lat)-1]), "max-ns")
	b.ReportMetric(0, "ns/op") // one op is 1000 spawns: not a latency
}

// stamper is one benchmark child; its stdout pipe is the watched fd.
type stamper struct {
	fd  int
	cmd *exec.Cmd
}

func (s *stamper) ExitFD() int { return s.fd }

// received is an exit and the instant the waiter got it.
type received struct {
	s  *stamper
	at time.Time
}

// waiter watches stampers and hands back each exit once, timestamped by a
// goroutine that does nothing else, so spawning never delays a receipt.
type waiter interface {
	watch(s *stamper) error
	exits() <-chan received
}

// runStampers runs n children, inflight at a time, and returns their latencies.
func runStampers(b *testing.B, w waiter, testinit string, n, inflight int) []time.Duration {
	lat := make([]time.Duration, 0, n)
	started := 0
	for ; started < inflight && started < n; started++ {
		startStamper(b, w, testinit)
	}
	for len(lat) < n {
		select {
		case r := <-w.exits():
			lat = append(lat, r.at.Sub(finishStamper(b, r.s)))
		case <-time.After(waitLimit):
			b.Fatalf("no exit within %v (%d of %d done)", waitLimit, len(lat), n)
		}
		if started < n {
			startStamper(b, w, testinit)
			started++
		}
	}
	return lat
}

// startStamper starts `testinit stamp` with a pipe as stdout. The read end is
// watched before the child starts; the parent's write end keeps it from
// hanging up until the child holds the only one.
func startStamper(b *testing.B, w waiter, testinit string) {
	r, wr := pipe(b)
	s := &stamper{fd: r}
	if err := w.watch(s); err != nil {
		b.Fatal(err)
	}
	out := os.NewFile(uintptr(wr), "stdout")
	s.cmd = exec.Command(testinit, "stamp")
	s.cmd.Stdout = out
	err := s.cmd.Start()
	out.Close()
	if err != nil {
		b.Fatal(err)
	}
}

// finishStamper reads the child's stamp, closes the pipe and reaps it.
func finishStamper(b *testing.B, s *stamper) time.Time {
	buf := make([]byte, 64)
	n, err := unix.Read(s.fd, buf)
	unix.Close(s.fd)
	if werr := s.cmd.Wait(); werr != nil {
		b.Fatalf("stamper: %v", werr)
	}
	if err != nil {
		b.Fatalf("read stamp: %v", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(string(buf[:n]), "STAMP ")), 10, 64)
	if err != nil {
		b.Fatalf("bad stamp %q: %v", buf[:n], err)
	}
	return time.Unix(0, ns)
}

func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(i, 0)]
}

// monitorWaiter receives from a Monitor's Exits().
type monitorWaiter struct {
	m   *Monitor
	out chan received
}

func newMonitorWaiter(b *testing.B, m *Monitor, n int) waiter {
	w := &monitorWaiter{m: m, out: make(chan received, n)}
	go func() {
		for range n {
			p, ok := <-m.Exits()
			if !ok {
				return
			}
			w.out <- received{p.(*stamper), time.Now()}
		}
	}()
	return w
}

func (w *monitorWaiter) watch(s *stamper) error { return w.m.Monitor(s) }
func (w *monitorWaiter) exits() <-chan received { return w.out }

// floorWaiter is the reference: one locked thread in a bare epoll_wait.
type floorWaiter struct {
	epfd int
	out  chan received
	mu   sync.Mutex
	byFD map[int32]*stamper
}

func newFloorWaiter(b *testing.B, n int) waiter {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	w := &floorWaiter{epfd: epfd, out: make(chan received, n), byFD: map[int32]*stamper{}}
	done := make(chan struct{})
	go w.run(n, done)
	b.Cleanup(func() {
		<-done
		unix.Close(epfd)
	})
	return w
}

func (w *floorWaiter) watch(s *stamper) error {
	w.mu.Lock()
	w.byFD[int32(s.fd)] = s
	w.mu.Unlock()
	return unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, s.fd, &unix.EpollEvent{Events: unix.EPOLLHUP, Fd: int32(s.fd)})
}

func (w *floorWaiter) exits() <-chan received { return w.out }

func (w *floorWaiter) run(n int, done chan struct{}) {
	defer close(done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	events := make([]unix.EpollEvent, 16)
	for got := 0; got < n; {
		k, err := unix.EpollWait(w.epfd, events, int(waitLimit/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err != nil || k == 0 {
			return // the benchmark reports the missing exits
		}
		at := time.Now()
		for _, ev := range events[:k] {
			unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, int(ev.Fd), nil)
			w.mu.Lock()
			s := w.byFD[ev.Fd]
			delete(w.byFD, ev.Fd)
			w.mu.Unlock()
			w.out <- received{s, at}
			got++
		}
	}
}
