package imagesvc

import (
	"testing"

	"github.com/evjournal/containerd/image"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestUserOf(t *testing.T) {
	for _, tc := range []struct {
		user     string
		uid      *runtimeapi.Int64Value
		username string
	}{
		{"", nil, ""},
		{":1000", nil, ""},
		{"0", &runtimeapi.Int64Value{Value: 0}, ""},
		{"1002", &runtimeapi.Int64Value{Value: 1002}, ""},
		{"1003:1003", &runtimeapi.Int64Value{Value: 1003}, ""},
		{"1003:staff", &runtimeapi.Int64Value{Value: 1003}, ""},
		{"4294967295", &runtimeapi.Int64Value{Value: 4294967295}, ""},
		{"www-data", nil, "www-data"},
		{"www-data:www-data", nil, "www-data"},
		{"www-data:50", nil, "www-data"},
		{"-1", nil, "-1"}, // not a uid: left for the runtime to refuse
	} {
		uid, username := userOf(tc.user)
		if !proto.Equal(uid, tc.uid) || username != tc.username {
			t.Errorf("userOf(%q) = %v, %q; want %v, %q", tc.user, uid, username, tc.uid, tc.username)
		}
	}
}

// TestToCRISize: CRI wants a size > 0, even for an image of empty files.
func TestToCRISize(t *testing.T) {
	for _, tc := range []struct{ size, want uint64 }{{0, 1}, {1, 1}, {5 << 20, 5 << 20}} {
		if got := toCRI(image.Image{ID: "sha256:ab", Size: tc.size}).Size; got != tc.want {
			t.Errorf("size %d reported as %d, want %d", tc.size, got, tc.want)
		}
	}
}

func TestAuthOf(t *testing.T) {
	if authOf(nil) != nil {
		t.Error("no AuthConfig gives credentials")
	}
	a := authOf(&runtimeapi.AuthConfig{Username: "u", Password: "p", Auth: "a", ServerAddress: "s", IdentityToken: "i", RegistryToken: "r"})
	if *a != (image.Auth{Username: "u", Password: "p", Auth: "a", ServerAddress: "s", IdentityToken: "i", RegistryToken: "r"}) {
		t.Errorf("authOf = %+v", a)
	}
}
