package supervisor

import (
	"context"
	"testing"
	"time"

	"github.com/evjournal/containerd/supervisor/journal"
)

// TestSubscribeInTheSameBatchAsAnEvent registers a subscriber in the same
// loop batch as an event, after its append and before its commit, under
// every sync policy: the subscriber gets it once (live), not also from the
// replay, and the next event follows with no gap.
func TestSubscribeInTheSameBatchAsAnEvent(t *testing.T) {
	for _, policy := range []journal.SyncPolicy{journal.SyncBatch, journal.SyncAlways, journal.SyncNone} {
		for _, bySeq := range []bool{false, true} {
			t.Run(policy.String(), func(t *testing.T) {
				h := newHarnessWith(t, newFakeRuntime(), t.TempDir(), func(c *Config) { c.SyncPolicy = policy })
				a := h.create("a")
				started := h.expect("start-container a")[0]
				req := SubscribeRequest{After: started.Timestamp} // resume after the last event seen
				if bySeq {
					req = SubscribeRequest{AfterSeq: started.Seq}
				}
				subCh := make(chan *Subscription, 1)
				h.s.send(func(s *Supervisor) {
					s.onOOM("a") // appended now, committed at the end of this batch
					subCh <- s.subscribe(req)
				})
				sub := <-subCh
				defer sub.Close()
				h.kill(a.proc("init"), 0)
				var got []string
				for len(got) < 2 {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					ev, err := sub.Next(ctx)
					cancel()
					if err != nil {
						t.Fatalf("after %v: %v", got, err)
					}
					got = append(got, describe(ev))
				}
				if got[0] != "oom a" || got[1] != "exit a init 0" {
					t.Fatalf("subscriber got %q, want the oom once then the exit", got)
				}
			})
		}
	}
}
