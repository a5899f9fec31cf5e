package imagesvc_test

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/evjournal/containerd/cri/imagesvc"
	"github.com/evjournal/containerd/image"
	"github.com/evjournal/containerd/integration/fixture"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestPull: a pull by tag returns the image ID (the config digest) as
// image_ref, and ImageStatus reports that ID whether asked by tag, ID, short
// ID or digest reference, as critest's "all kinds of references" spec wants.
// A pull by digest records no tag; a pull without a tag records ":latest".
func TestPull(t *testing.T) {
	e := newEnv(t, image.Options{})
	reg := fixture.NewRegistry(t)
	img := fixture.TestinitImage(t, v1.Config{Env: []string{"IMAGE=app"}})
	ref, digest := reg.Push(t, "test/app:1", img)
	configDigest, _ := img.ConfigName()

	id := e.pull(t, ref)
	if id != configDigest.String() {
		t.Fatalf("image_ref = %q, want the image ID %s", id, configDigest)
	}
	st := e.status(t, ref)
	repoDigest := reg.Host + "/test/app@" + digest
	want := &runtimeapi.Image{Id: id, RepoTags: []string{ref}, RepoDigests: []string{repoDigest},
		Size: st.GetSize(), Spec: &runtimeapi.ImageSpec{Image: id}}
	if !proto.Equal(st, want) || st.Size < 1000 { // the test init alone is megabytes
		t.Fatalf("ImageStatus = %v, want %v", st, want)
	}
	for _, name := range []string{id, strings.TrimPrefix(id, "sha256:"), id[:19], repoDigest} {
		if got := e.status(t, name); !proto.Equal(got, st) {
			t.Errorf("ImageStatus(%q) = %v, want %v", name, got, st)
		}
	}

	other := fixture.TestinitImage(t, v1.Config{Env: []string{"IMAGE=other"}})
	_, otherDigest := reg.Push(t, "test/other:1", other)
	byDigest := reg.Host + "/test/other@" + otherDigest
	otherID := e.pull(t, byDigest)
	if st := e.status(t, byDigest); st.GetId() != otherID || len(st.RepoTags) != 0 || !slices.Equal(st.RepoDigests, []string{byDigest}) {
		t.Errorf("pulled by digest: %v, want no tag and digest %s", st, byDigest)
	}

	reg.Push(t, "test/app:latest", img)
	e.pull(t, reg.Host+"/test/app")
	if st := e.status(t, id); !slices.Equal(st.GetRepoTags(), []string{ref, reg.Host + "/test/app:latest"}) {
		t.Errorf("pulled without a tag: repo tags %v, want %s and its :latest", st.GetRepoTags(), ref)
	}
}

// TestPullMirror: a registry.k8s.io name is pulled from the mirror the
// store is configured with, and recorded under its own name. A name missing
// from the mirror is NotFound, naming the mirror (that name's registry is a
// .invalid host, never reached: the test does not touch the network).
func TestPullMirror(t *testing.T) {
	reg := fixture.NewRegistry(t)
	reg.Push(t, "e2e-test-images/busybox:1.29-2", fixture.TestinitImage(t, v1.Config{}))
	mirror := []string{"http://" + reg.Host}
	e := newEnv(t, image.Options{Mirrors: map[string][]string{"registry.k8s.io": mirror, "mirrored.invalid": mirror}})
	const ref = "registry.k8s.io/e2e-test-images/busybox:1.29-2"
	id := e.pull(t, ref)
	st := e.status(t, ref)
	if st.GetId() != id || !slices.Equal(st.RepoTags, []string{ref}) ||
		len(st.RepoDigests) != 1 || !strings.HasPrefix(st.RepoDigests[0], "registry.k8s.io/e2e-test-images/busybox@sha256:") {
		t.Errorf("ImageStatus = %v, want %s under its registry.k8s.io names", st, id)
	}
	_, err := e.client.PullImage(ctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "mirrored.invalid/e2e-test-images/busybox:missing"}})
	wantCode(t, "missing from the mirror", err, codes.NotFound, "busybox:missing", "mirror http://"+reg.Host)
}

// TestPullAuth: the request's AuthConfig reaches the registry; none, a
// wrong password or a wrong user are Unauthenticated errors naming the ref.
func TestPullAuth(t *testing.T) {
	e := newEnv(t, image.Options{})
	reg := fixture.NewRegistry(t)
	ref, _ := reg.Push(t, "private/app:1", fixture.TestinitImage(t, v1.Config{}))
	reg.SetAuth("alice", "s3cret")
	pull := func(auth *runtimeapi.AuthConfig) error {
		_, err := e.client.PullImage(ctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}, Auth: auth})
		return err
	}
	for _, auth := range []*runtimeapi.AuthConfig{nil, {Username: "alice", Password: "wrong"}, {Username: "bob", Password: "s3cret"}} {
		err := pull(auth)
		wantCode(t, "auth "+auth.GetUsername(), err, codes.Unauthenticated, ref)
		t.Logf("auth %q: %v", auth.GetUsername(), err)
	}
	if l := e.list(t, nil); len(l) != 0 {
		t.Errorf("failed pulls left images %v", l)
	}
	for _, auth := range []*runtimeapi.AuthConfig{
		{Username: "alice", Password: "s3cret"},
		{Auth: "YWxpY2U6czNjcmV0"}, // base64("alice:s3cret")
		{Username: "alice", Password: "s3cret", ServerAddress: reg.Host},
	} {
		if err := pull(auth); err != nil {
			t.Errorf("auth %v: %v", auth, err)
		}
	}
}

// TestListImages: no filter lists every image once, with all its tags; a
// filter by tag, digest reference, ID or short ID lists the image it names;
// a name of no image, or a malformed one, lists nothing. StreamImages
// sends the same list.
func TestListImages(t *testing.T) {
	e := newEnv(t, image.Options{})
	reg := fixture.NewRegistry(t)
	imgA := fixture.TestinitImage(t, v1.Config{Env: []string{"IMAGE=a"}})
	a1, digestA := reg.Push(t, "test/a:1", imgA)
	a2, _ := reg.Push(t, "test/a:2", imgA)
	b, _ := reg.Push(t, "test/b:1", fixture.TestinitImage(t, v1.Config{Env: []string{"IMAGE=b"}}))
	idA, _ := e.pull(t, a1), e.pull(t, a2)
	idB := e.pull(t, b)

	all := e.list(t, nil)
	if len(all) != 2 || !slices.Equal(ids(all), sorted(idA, idB)) {
		t.Fatalf("ListImages = %v, want %s and %s", all, idA, idB)
	}
	if a := all[slices.Index(ids(all), idA)]; !slices.Equal(a.RepoTags, []string{a1, a2}) {
		t.Errorf("image a has tags %v, want %s and %s", a.RepoTags, a1, a2)
	}
	for _, tc := range []struct {
		filter string
		want   []string
	}{
		{"", []string{idA, idB}},
		{a2, []string{idA}},
		{reg.Host + "/test/a@" + digestA, []string{idA}},
		{idB, []string{idB}},
		{strings.TrimPrefix(idB, "sha256:")[:12], []string{idB}},
		{reg.Host + "/test/a:3", nil},
		{"Upper/Case:1", nil},
	} {
		got := e.list(t, &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: tc.filter}})
		if !slices.Equal(ids(got), sorted(tc.want...)) {
			t.Errorf("filter %q: %v, want %v", tc.filter, ids(got), tc.want)
		}
	}

	stream, err := e.client.StreamImages(ctx(t), &runtimeapi.StreamImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var streamed []*runtimeapi.Image
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("StreamImages: %v", err)
		}
		streamed = append(streamed, resp.Images...)
	}
	if len(streamed) != len(all) || !proto.Equal(&runtimeapi.ListImagesResponse{Images: streamed}, &runtimeapi.ListImagesResponse{Images: all}) {
		t.Errorf("StreamImages = %v, want %v", streamed, all)
	}
}

func ids(images []*runtimeapi.Image) []string {
	var out []string
	for _, img := range images {
		out = append(out, img.Id)
	}
	return out
}

func sorted(s ...string) []string { return slices.Sorted(slices.Values(s)) }

// TestImageStatus: an image the store lacks is a response with no image
// and no error; a malformed or empty name is InvalidArgument; verbose adds
// the record with its OCI config as JSON.
func TestImageStatus(t *testing.T) {
	e := newEnv(t, image.Options{})
	reg := fixture.NewRegistry(t)
	ref, _ := reg.Push(t, "test/app:1", fixture.TestinitImage(t, v1.Config{Cmd: []string{"echo", "hi"}, WorkingDir: "/tmp"}))
	for _, name := range []string{ref, reg.Host + "/test/app:2", "busybox", "sha256:" + strings.Repeat("0", 64)} {
		if st := e.status(t, name); st != nil {
			t.Errorf("ImageStatus(%q) before any pull = %v, want nil", name, st)
		}
	}
	id := e.pull(t, ref)
	for _, name := range []string{"", "Upper/Case:1", "a:b:c"} {
		_, err := e.client.ImageStatus(ctx(t), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: name}})
		wantCode(t, "ImageStatus("+name+")", err, codes.InvalidArgument, name)
	}
	_, err := e.client.ImageStatus(ctx(t), &runtimeapi.ImageStatusRequest{})
	wantCode(t, "ImageStatus without an image spec", err, codes.InvalidArgument, "empty")

	resp, err := e.client.ImageStatus(ctx(t), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info image.Image
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil {
		t.Fatalf("verbose info %q: %v", resp.Info, err)
	}
	if info.ID != id || info.Config.WorkingDir != "/tmp" || !slices.Equal(info.Config.Cmd, []string{"echo", "hi"}) || len(info.Layers) != 1 {
		t.Errorf("verbose info = %+v", info)
	}
	if resp, _ := e.client.ImageStatus(ctx(t), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); len(resp.GetInfo()) != 0 {
		t.Errorf("info without verbose: %v", resp.GetInfo())
	}
}

// TestImageUser: the config's User becomes uid when its user part is
// numeric, username otherwise, as critest's "Uid|Username" spec checks.
func TestImageUser(t *testing.T) {
	e := newEnv(t, image.Options{})
	reg := fixture.NewRegistry(t)
	for i, tc := range []struct {
		user     string
		uid      *runtimeapi.Int64Value
		username string
	}{
		{"", nil, ""},
		{"1002", &runtimeapi.Int64Value{Value: 1002}, ""},
		{"www-data", nil, "www-data"},
		{"1003:1003", &runtimeapi.Int64Value{Value: 1003}, ""},
		{"www-data:www-data", nil, "www-data"},
		{"0", &runtimeapi.Int64Value{Value: 0}, ""},
	} {
		ref, _ := reg.Push(t, "test/user:"+string(rune('a'+i)), fixture.TestinitImage(t, v1.Config{User: tc.user}))
		e.pull(t, ref)
		st := e.status(t, ref)
		if !proto.Equal(st.Uid, tc.uid) || st.Username != tc.username {
			t.Errorf("User %q: uid %v username %q, want %v %q", tc.user, st.Uid, st.Username, tc.uid, tc.username)
		}
	}
}

// TestRemoveImage: removing an image the store lacks succeeds (twice); an
// image a prepared rootfs uses is refused with FailedPrecondition naming
// the container, and removed once the rootfs is; a malformed name is
// InvalidArgument.
func TestRemoveImage(t *testing.T) {
	e := newEnv(t, image.Options{})
	reg := fixture.NewRegistry(t)
	ref, _ := reg.Push(t, "test/app:1", fixture.TestinitImage(t, v1.Config{}))
	remove := func(name string) error {
		_, err := e.client.RemoveImage(ctx(t), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: name}})
		return err
	}
	for range 2 {
		if err := remove(ref); err != nil {
			t.Fatalf("RemoveImage of an image never pulled: %v, want success", err)
		}
	}
	id := e.pull(t, ref)
	if _, err := e.store.PrepareRootfs("c1", id); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "RemoveImage in use", remove(ref), codes.FailedPrecondition, "c1", ref, "in use")
	if e.status(t, ref) == nil {
		t.Fatal("the image in use is gone after the refused removal")
	}
	if err := e.store.RemoveRootfs("c1"); err != nil {
		t.Fatal(err)
	}
	if err := remove(id); err != nil {
		t.Fatalf("RemoveImage once unused: %v", err)
	}
	if st := e.status(t, ref); st != nil {
		t.Errorf("ImageStatus after RemoveImage = %v, want nil", st)
	}
	if err := remove(id); err != nil {
		t.Errorf("RemoveImage again: %v, want success", err)
	}
	wantCode(t, "RemoveImage(Upper/Case:1)", remove("Upper/Case:1"), codes.InvalidArgument, "Upper/Case:1")
	if l := e.list(t, nil); len(l) != 0 {
		t.Errorf("images left: %v", l)
	}
}

// TestPullBadInput: malformed names are InvalidArgument, a missing image
// NotFound; each error names what was asked.
func TestPullBadInput(t *testing.T) {
	e := newEnv(t, image.Options{})
	reg := fixture.NewRegistry(t)
	for _, tc := range []struct {
		ref  string
		code codes.Code
	}{
		{"", codes.InvalidArgument},
		{"Upper/Case:1", codes.InvalidArgument},
		{"a:b:c", codes.InvalidArgument},
		{"http://" + reg.Host + "/x:1", codes.InvalidArgument},
		{reg.Host + "/no/such:1", codes.NotFound},
	} {
		_, err := e.client.PullImage(ctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: tc.ref}})
		wantCode(t, "PullImage("+tc.ref+")", err, tc.code, tc.ref)
	}
	_, err := e.client.PullImage(ctx(t), &runtimeapi.PullImageRequest{})
	wantCode(t, "PullImage without an image spec", err, codes.InvalidArgument, "empty")
	if l := e.list(t, nil); len(l) != 0 {
		t.Errorf("images after failed pulls: %v", l)
	}
}

// TestImageFsInfo: one image filesystem, at the mountpoint holding the
// store, whose usage grows with a pull; no separate container filesystem.
func TestImageFsInfo(t *testing.T) {
	e := newEnv(t, image.Options{})
	reg := fixture.NewRegistry(t)
	ref, _ := reg.Push(t, "test/app:1", fixture.TestinitImage(t, v1.Config{}))
	fsInfo := func() *runtimeapi.FilesystemUsage {
		t.Helper()
		before := time.Now().UnixNano()
		resp, err := e.client.ImageFsInfo(ctx(t), &runtimeapi.ImageFsInfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ImageFilesystems) != 1 || len(resp.ContainerFilesystems) != 0 {
			t.Fatalf("ImageFsInfo = %v, want one image filesystem and no container one", resp)
		}
		fs := resp.ImageFilesystems[0]
		if fs.Timestamp < before || fs.Timestamp > time.Now().UnixNano() {
			t.Errorf("timestamp %d is not the time of the call", fs.Timestamp)
		}
		return fs
	}
	empty := fsInfo()
	e.pull(t, ref)
	fs := fsInfo()
	if fs.UsedBytes.GetValue() <= empty.UsedBytes.GetValue()+1000 || fs.InodesUsed.GetValue() <= empty.InodesUsed.GetValue() {
		t.Errorf("usage %v after a pull, %v before: want it grown by the layer", fs, empty)
	}
	mp := fs.FsId.GetMountpoint()
	t.Logf("store %s on the filesystem mounted at %s", e.root, mp)
	if !(mp == "/" || e.root == mp || strings.HasPrefix(e.root, mp+"/")) || !sameDevice(t, mp, e.root) {
		t.Errorf("mountpoint %q: not on the filesystem of the store at %s", mp, e.root)
	}
	if mounts := fixture.MountsUnder(t, mp); mp != "/" && slices.ContainsFunc(mounts, func(m string) bool { return strings.HasPrefix(e.root+"/", m+"/") }) {
		t.Errorf("mountpoint %q is not the deepest one holding %s (mounts %v)", mp, e.root, mounts)
	}
}

func sameDevice(t *testing.T, a, b string) bool {
	t.Helper()
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		t.Fatal(err)
	}
	return sa.Dev == sb.Dev
}

// TestResolveForContainer: what kubelet passes (the image_ref) and what
// other clients pass (a tag, a short ID) find the image; a missing image is
// NotFound telling to pull it, an empty name InvalidArgument.
func TestResolveForContainer(t *testing.T) {
	e := newEnv(t, image.Options{})
	reg := fixture.NewRegistry(t)
	ref, _ := reg.Push(t, "test/app:1", fixture.TestinitImage(t, v1.Config{User: "1000"}))
	id := e.pull(t, ref)
	for _, name := range []string{id, ref, strings.TrimPrefix(id, "sha256:")[:12]} {
		img, err := imagesvc.ResolveForContainer(e.store, name)
		if err != nil || img.ID != id || img.Config.User != "1000" {
			t.Errorf("ResolveForContainer(%q) = %s %+v, %v; want %s", name, img.ID, img.Config, err, id)
		}
	}
	_, err := imagesvc.ResolveForContainer(e.store, reg.Host+"/test/app:2")
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "test/app:2") || !strings.Contains(err.Error(), "pull") {
		t.Errorf("missing image: %v, want not found naming it", err)
	}
	if _, err := imagesvc.ResolveForContainer(e.store, ""); !errdefs.IsInvalidArgument(err) {
		t.Errorf("empty name: %v, want invalid argument", err)
	}
}

// TestPullContextDone: a pull whose caller went away or whose deadline
// passed fails with Canceled or DeadlineExceeded (critest's "public image
// should timeout if requested" spec), whatever the store made of the cut.
// The service is called directly: through gRPC the client would decide the
// code itself. No root needed: nothing is unpacked.
func TestPullContextDone(t *testing.T) {
	store, err := image.Open(t.TempDir(), image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := fixture.NewRegistry(t)
	ref, _ := reg.Push(t, "test/app:1", fixture.ImageOf(t, v1.Config{}, fixture.LayerOf(t, fixture.File{Name: "f", Body: "x"})))
	svc := imagesvc.New(store)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		ctx  context.Context
		code codes.Code
	}{{canceled, codes.Canceled}, {expired, codes.DeadlineExceeded}} {
		_, err := svc.PullImage(tc.ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		wantCode(t, "pull with "+tc.ctx.Err().Error(), err, tc.code, ref)
	}
	if l := store.List(); len(l) != 0 {
		t.Errorf("images after cut pulls: %v", l)
	}
}

// TestImageFsInfoOwnMount: a store on a filesystem of its own (a tmpfs
// mounted for the test) reports that mount, not the one above it.
func TestImageFsInfoOwnMount(t *testing.T) {
	fixture.RequireRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	store, err := image.Open(dir+"/store", image.Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := serve(t, imagesvc.New(store)).ImageFsInfo(ctx(t), &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if mp := resp.ImageFilesystems[0].FsId.GetMountpoint(); mp != dir {
		t.Errorf("mountpoint %q, want the tmpfs at %s", mp, dir)
	}
	if resp.ImageFilesystems[0].InodesUsed.GetValue() == 0 {
		t.Errorf("no inode counted for the store's records dir: %v", resp)
	}
}
