package ocispec

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Files read from an image are hostile: a FIFO blocks its reader's open, a
// character device feeds it bytes without end, a symlink points at the
// host's files. readImageFile is the one way the daemon reads them.
const (
	// maxImageFile bounds a file read from an image (a 4 MiB /etc/group
	// is far beyond any real one).
	maxImageFile = 4 << 20
	// maxImageSymlinks bounds the symlinks followed for one file, as the
	// kernel's own limit (MAXSYMLINKS).
	maxImageSymlinks = 40
	// resolveInRoot resolves every component within the root: "..", and
	// absolute symlinks, stop at the rootfs, as they would in the
	// container; magic links (/proc/self/...) are refused.
	resolveInRoot = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS
)

// readImageFile reads name (a path in the image, "/etc/passwd") from
// rootfs as the container would see it: resolved within the rootfs
// (openat2 RESOLVE_IN_ROOT; symlinks, absolute ones included, never leave
// it), classified before it is opened (through an O_PATH descriptor: a
// FIFO or a device is never opened), then opened O_NONBLOCK|O_NOFOLLOW and
// read up to maxImageFile. A missing file is an error wrapping
// fs.ErrNotExist; anything but a regular file, a loop of symlinks or a file
// over the bound is an error naming the file.
func readImageFile(rootfs, name string) ([]byte, error) {
	root, err := unix.Open(rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open rootfs", Path: rootfs, Err: err}
	}
	defer unix.Close(root)
	resolved, err := resolveImageFile(root, name)
	if err != nil {
		return nil, err
	}
	fd, err := openat2(root, resolved, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_NOCTTY)
	if err != nil {
		return nil, imageFileError(name, resolved, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := wantRegular(int(f.Fd()), name, resolved); err != nil { // replaced since it was classified
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxImageFile+1))
	if err != nil {
		return nil, imageFileError(name, resolved, err)
	}
	if len(data) > maxImageFile {
		return nil, fmt.Errorf("%s in the image is larger than the %d bytes read from an image", describe(name, resolved), maxImageFile)
	}
	return data, nil
}

// resolveImageFile follows the symlinks of name's last component (the
// kernel resolves the others within the root) and returns the path of the
// regular file it leads to.
func resolveImageFile(root int, name string) (string, error) {
	p := name
	for range maxImageSymlinks {
		fd, err := openat2(root, p, unix.O_PATH|unix.O_NOFOLLOW)
		if err != nil {
			return "", imageFileError(name, p, err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			var target string
			target, err = readlinkFd(fd)
			unix.Close(fd)
			if err != nil {
				return "", imageFileError(name, p, err)
			}
			p = linkTarget(p, target)
			continue
		}
		if err == nil {
			err = wantRegular(fd, name, p)
		}
		unix.Close(fd)
		return p, err
	}
	return "", fmt.Errorf("%s in the image: more than %d symlinks to follow", name, maxImageSymlinks)
}

// linkTarget is where a symlink at p pointing at target leads: an absolute
// target from the root, a relative one from p's directory. Nothing is
// cleaned here: ".." after a symlinked directory is the kernel's to resolve.
func linkTarget(p, target string) string {
	if strings.HasPrefix(target, "/") {
		return target
	}
	return p[:strings.LastIndex(p, "/")+1] + target
}

// wantRegular refuses anything but a regular file.
func wantRegular(fd int, name, resolved string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return imageFileError(name, resolved, err)
	}
	if kind := fileKind(st.Mode); kind != "" {
		return fmt.Errorf("%s in the image is %s, not a regular file", describe(name, resolved), kind)
	}
	return nil
}

// fileKind names a file type that is not a regular file; "" for one.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return ""
	case unix.S_IFIFO:
		return "a named pipe (FIFO)"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symlink"
	}
	return fmt.Sprintf("of type %#o", mode&unix.S_IFMT)
}

// describe names the file and, when a symlink led elsewhere, where.
func describe(name, resolved string) string {
	if resolved == name {
		return name
	}
	return fmt.Sprintf("%s (a symlink to %s)", name, resolved)
}

// imageFileError names the file of a failed open or read; fs.ErrNotExist
// and the errno stay reachable.
func imageFileError(name, resolved string, err error) error {
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("%s in the image: a loop of symlinks: %w", describe(name, resolved), err)
	}
	return fmt.Errorf("%s in the image: %w", describe(name, resolved), err)
}

// openat2 opens p under root with RESOLVE_IN_ROOT, close-on-exec. EAGAIN
// (a rename raced the resolution of "..") is tried again, a few times.
func openat2(root int, p string, flags int) (fd int, err error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: resolveInRoot}
	for range 16 {
		fd, err = unix.Openat2(root, p, &how)
		if err != unix.EINTR && err != unix.EAGAIN {
			return fd, err
		}
	}
	return -1, err
}

// readlinkFd reads the target of the symlink open (O_PATH|O_NOFOLLOW) as fd.
func readlinkFd(fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	if n == len(buf) {
		return "", unix.ENAMETOOLONG
	}
	return string(buf[:n]), nil
}
