package ocispec

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
	"golang.org/x/sys/unix"
)

// imageTree makes a rootfs in a temp dir: each entry is a path and what to
// make there ("file:CONTENT", "link:TARGET", "fifo", "dir", "chr").
func imageTree(t *testing.T, entries ...[2]string) string {
	t.Helper()
	root := t.TempDir()
	for _, e := range entries {
		p := filepath.Join(root, e[0])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		kind, arg, _ := strings.Cut(e[1], ":")
		var err error
		switch kind {
		case "file":
			err = os.WriteFile(p, []byte(arg), 0o644)
		case "link":
			err = os.Symlink(arg, p)
		case "fifo":
			err = unix.Mkfifo(p, 0o644)
		case "dir":
			err = os.Mkdir(p, 0o755)
		case "chr": // /dev/urandom's numbers: endless bytes with newlines
			err = unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 9)))
		default:
			t.Fatalf("unknown entry kind %q", kind)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// readBounded is readImageFile failing the test if it does not return
// promptly (the old code blocked for ever on a FIFO).
func readBounded(t *testing.T, rootfs, name string) ([]byte, error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := readImageFile(rootfs, name)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("reading %s from the image did not return within 10 s", name)
		return nil, nil
	}
}

func TestReadImageFile(t *testing.T) {
	// A file on the host that an image's symlink names: never what is read.
	host := t.TempDir()
	hostFile := filepath.Join(host, "passwd")
	if err := os.WriteFile(hostFile, []byte("host's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		entries [][2]string
		want    string // the content, or the error's text
		missing bool
	}{
		{"regular", [][2]string{{"etc/passwd", "file:mine\n"}}, "mine\n", false},
		{"absolute symlink, resolved in the rootfs", [][2]string{{"usr/lib/passwd", "file:image's\n"}, {"etc/passwd", "link:/usr/lib/passwd"}}, "image's\n", false},
		{"symlinked directory", [][2]string{{"private/etc/passwd", "file:private\n"}, {"etc", "link:/private/etc"}}, "private\n", false},
		{"a chain of symlinks", [][2]string{{"a", "file:end\n"}, {"b", "link:a"}, {"etc/passwd", "link:../b"}}, "end\n", false},
		{"dot-dots stop at the root", [][2]string{{"etc/real", "file:inside\n"}, {"etc/passwd", "link:../../../../../../etc/real"}}, "inside\n", false},
		{"absolute symlink to the host's file", [][2]string{{"etc/passwd", "link:" + hostFile}}, "", true},
		{"relative symlink out of the rootfs", [][2]string{{"etc/passwd", "link:../../../../../../.." + hostFile}}, "", true},
		{"missing", [][2]string{{"etc/group", "file:x"}}, "", true},
		{"FIFO", [][2]string{{"etc/passwd", "fifo"}}, "/etc/passwd in the image is a named pipe (FIFO), not a regular file", false},
		{"FIFO behind a symlink", [][2]string{{"p", "fifo"}, {"etc/passwd", "link:/p"}}, "/etc/passwd (a symlink to /p) in the image is a named pipe (FIFO)", false},
		{"directory", [][2]string{{"etc/passwd", "dir"}}, "/etc/passwd in the image is a directory", false},
		{"loop", [][2]string{{"etc/passwd", "link:/etc/group"}, {"etc/group", "link:passwd"}}, "more than 40 symlinks", false},
		{"too big", [][2]string{{"etc/passwd", "file:" + strings.Repeat("x", maxImageFile+1)}}, "larger than the 4194304 bytes", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := readBounded(t, imageTree(t, tt.entries...), "/etc/passwd")
			switch {
			case tt.missing:
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("read %q, %v; want not found", data, err)
				}
			case err != nil:
				if !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %q, want %q", err, tt.want)
				}
			case string(data) != tt.want:
				t.Fatalf("read %q, want %q", data, tt.want)
			}
		})
	}
}

// TestReadImageFileDevice: a character device that would feed bytes for
// ever is refused without being opened.
func TestReadImageFileDevice(t *testing.T) {
	fixture.RequireRoot(t) // mknod
	_, err := readBounded(t, imageTree(t, [2]string{"etc/group", "chr"}), "/etc/group")
	if err == nil || !strings.Contains(err.Error(), "/etc/group in the image is a character device, not a regular file") {
		t.Fatalf("got %v, want the character device refused", err)
	}
}

// TestContainerUserHostileFiles: a user looked up in a hostile image is an
// invalid-argument error naming the file, at once.
func TestContainerUserHostileFiles(t *testing.T) {
	rootfs := imageTree(t, [2]string{"etc/passwd", "fifo"})
	done := make(chan error, 1)
	go func() {
		_, err := containerUser(containerScope, rootfs, userRequest{username: "app"})
		done <- err
	}()
	select {
	case err := <-done:
		wantErr(t, err, "container config: run_as_username: /etc/passwd in the image is a named pipe (FIFO), not a regular file")
	case <-time.After(10 * time.Second):
		t.Fatal("containerUser blocked on a FIFO /etc/passwd")
	}
	// An absolute symlink is followed within the rootfs.
	rootfs = imageTree(t, [2]string{"usr/share/passwd", "file:app:x:1234:1235::/:/bin/sh\n"}, [2]string{"etc/passwd", "link:/usr/share/passwd"})
	u, err := containerUser(containerScope, rootfs, userRequest{username: "app"})
	if err != nil || u.UID != 1234 || u.GID != 1235 {
		t.Fatalf("user app through an absolute symlink: %+v, %v; want 1234:1235", u, err)
	}
}
