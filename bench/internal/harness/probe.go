package harness

import (
	"context"
	"sync"
	"time"

	"github.com/evjournal/containerd/api/types"
)

// ProbeLoop measures the daemon's loop latency: every 5 ms until stop it
// times a Signal(0) to id's init (one loop task, no runc), in ms. The
// result is complete once wg is done.
func ProbeLoop(d *Daemon, id string, stop <-chan struct{}, wg *sync.WaitGroup) *[]float64 {
	out := new([]float64)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			t0 := time.Now()
			if _, err := d.Client.Signal(context.Background(), &types.SignalRequest{Id: id, Pid: "init", Signal: 0}); err == nil {
				*out = append(*out, float64(time.Since(t0))/float64(time.Millisecond))
			}
		}
	}()
	return out
}

// Repeat runs body(i) over and over in n goroutines (i = 0..n-1), until stop
// is closed or body returns false; wg counts the goroutines. It is the load
// generator of the benchmarks and the reliability suite.
func Repeat(n int, stop <-chan struct{}, wg *sync.WaitGroup, body func(i int) bool) {
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !body(i) {
					return
				}
			}
		}()
	}
}
