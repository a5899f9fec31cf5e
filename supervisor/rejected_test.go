package supervisor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// TestRejectedCreateIsLogged: a create the daemon refuses, early (a bad
// id) or late (the runtime failed), is logged at info level with its
// reason, so an operator sees why a client's container did not come.
func TestRejectedCreateIsLogged(t *testing.T) {
	logger, hook := logtest.NewNullLogger()
	rt := newFakeRuntime()
	rt.failStart = errors.New("oci runtime error: boom")
	s, err := New(Config{StateDir: t.TempDir(), SyncPolicy: testSync, RuntimeImpl: rt, MonitorImpl: newFakeMonitor(), Clock: newFakeClock(),
		ReconcileInterval: time.Minute, Logger: logrus.NewEntry(logger)})
	must(t, err)
	must(t, s.Start(context.Background()))
	defer s.Stop()
	for id, reason := range map[string]string{"../x": "invalid id", "a": "oci runtime error: boom"} {
		if _, err := s.CreateContainer(context.Background(), CreateRequest{ID: id, Bundle: "/b"}); err == nil {
			t.Fatalf("create %q succeeded", id)
		}
		found := false
		for _, e := range hook.AllEntries() {
			cause, _ := e.Data[logrus.ErrorKey].(error)
			if e.Message == "create rejected" && e.Level == logrus.InfoLevel && e.Data["container"] == id &&
				e.Data["bundle"] == "/b" && cause != nil && strings.Contains(cause.Error(), reason) {
				found = true
			}
		}
		if !found {
			t.Errorf("create %q: no info entry \"create rejected\" with %q among %d entries", id, reason, len(hook.AllEntries()))
		}
	}
}
