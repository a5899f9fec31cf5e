package server

import (
	"context"
	"strings"
	"testing"

	"github.com/evjournal/containerd/supervisor/objects"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestIDPrefixLookup: a pod or container is found by its id or by a
// unique prefix of 8 characters or more; a prefix two ids share is
// InvalidArgument naming them, whichever the map gives first.
func TestIDPrefixLookup(t *testing.T) {
	ids := map[string]string{
		"a1": "abcdef01" + strings.Repeat("1", 56),
		"a2": "abcdef01" + strings.Repeat("2", 56),
		"b":  "abcdef99" + strings.Repeat("3", 56),
	}
	tests := []struct {
		name, id, want string
		code           codes.Code
	}{
		{name: "full id", id: ids["a1"], want: ids["a1"]},
		{name: "unique prefix", id: "abcdef99", want: ids["b"]},
		{name: "longer unique prefix", id: "abcdef012", want: ids["a2"]},
		{name: "ambiguous prefix", id: "abcdef01", code: codes.InvalidArgument},
		{name: "prefix under 8 characters", id: "abcdef9", code: codes.NotFound},
		{name: "no such id", id: "0123456789", code: codes.NotFound},
		{name: "empty", id: "", code: codes.InvalidArgument},
	}
	for _, kind := range []objects.Kind{objects.Sandbox, objects.Container} {
		e := newEnv(t)
		importObjects(e, kind, ids)
		for _, tc := range tests {
			t.Run(string(kind)+", "+tc.name, func(t *testing.T) {
				got, err := statusID(e, kind, tc.id)
				if tc.code != codes.OK {
					wantCode(t, err, tc.code)
					if tc.code == codes.InvalidArgument && tc.id != "" && !(strings.Contains(err.Error(), ids["a1"]) && strings.Contains(err.Error(), ids["a2"])) {
						t.Fatalf("%v does not name both ids the prefix matches", err)
					}
					return
				}
				if err != nil || got != tc.want {
					t.Fatalf("found %q (%v), want %s", got, err, tc.want)
				}
			})
		}
	}
}

// importObjects makes created objects of kind with these ids (containers
// in a pod of their own) and their records.
func importObjects(e *env, kind objects.Kind, ids map[string]string) {
	e.t.Helper()
	var objs []objects.Object
	pod := newID()
	if kind == objects.Container {
		e.srv.recs.addSandbox(&sandbox{rec: sandboxRecord{ID: pod}, cfg: podConfig("web")})
		objs = append(objs, objects.Object{ID: pod, Kind: objects.Sandbox, Name: "pod/web", State: objects.Exited})
	}
	for k, id := range ids {
		o := objects.Object{ID: id, Kind: kind, Name: "name/" + k, State: objects.Created}
		if kind == objects.Sandbox {
			e.srv.recs.addSandbox(&sandbox{rec: sandboxRecord{ID: id}, cfg: podConfig(k)})
		} else {
			o.SandboxID = pod
			e.srv.recs.addContainer(&container{rec: containerRecord{ID: id, SandboxID: pod}, cfg: ctrConfig(k)})
		}
		objs = append(objs, o)
	}
	if _, err := e.loop.ImportObjects(context.Background(), objs); err != nil {
		e.t.Fatal(err)
	}
}

// statusID is the id the status call of kind finds for id.
func statusID(e *env, kind objects.Kind, id string) (string, error) {
	if kind == objects.Sandbox {
		r, err := e.srv.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
		return r.GetStatus().GetId(), err
	}
	r, err := e.srv.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	return r.GetStatus().GetId(), err
}
