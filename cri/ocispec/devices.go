package ocispec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// hostDevDir is where privileged containers' devices come from (a
// variable for tests).
var hostDevDir = "/dev"

// criDevices maps the config's devices: each host path (symlinks followed)
// must be a character or block device; its type, numbers, mode and owner
// come from stat, and the device cgroup allows it with the permissions
// given ("rwm" when empty).
func criDevices(ds []*runtime.Device) ([]specs.LinuxDevice, []specs.LinuxDeviceCgroup, error) {
	var devs []specs.LinuxDevice
	var rules []specs.LinuxDeviceCgroup
	for i, d := range ds {
		field := fmt.Sprintf("device[%d]", i)
		perms := d.GetPermissions()
		if perms == "" {
			perms = "rwm"
		}
		if strings.Trim(perms, "rwm") != "" {
			return nil, nil, fieldErrorf(containerScope, field+" permissions", "%q is not made of r, w and m", perms)
		}
		dst := d.GetContainerPath()
		if dst == "" {
			dst = d.GetHostPath()
		}
		if !path.IsAbs(dst) {
			return nil, nil, fieldErrorf(containerScope, field+" container path", "%q is not absolute", dst)
		}
		dev, err := deviceAt(d.GetHostPath())
		if err != nil {
			return nil, nil, fieldError(containerScope, fmt.Sprintf("%s host path %s", field, d.GetHostPath()), err)
		}
		dev.Path = path.Clean(dst)
		devs = append(devs, dev)
		rules = append(rules, allowDevice(dev, perms))
	}
	return devs, rules, nil
}

var errNotDevice = errors.New("not a device")

// deviceAt stats a host device node.
func deviceAt(p string) (specs.LinuxDevice, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return specs.LinuxDevice{}, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	var typ string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		typ = "c"
	case unix.S_IFBLK:
		typ = "b"
	default:
		return specs.LinuxDevice{}, errNotDevice
	}
	mode := os.FileMode(st.Mode & 0o777)
	uid, gid := st.Uid, st.Gid
	return specs.LinuxDevice{
		Path: p, Type: typ, Major: int64(unix.Major(uint64(st.Rdev))), Minor: int64(unix.Minor(uint64(st.Rdev))),
		FileMode: &mode, UID: &uid, GID: &gid,
	}, nil
}

func allowDevice(d specs.LinuxDevice, perms string) specs.LinuxDeviceCgroup {
	major, minor := d.Major, d.Minor
	return specs.LinuxDeviceCgroup{Allow: true, Type: d.Type, Major: &major, Minor: &minor, Access: perms}
}

// hostDevices lists the host's device nodes for a privileged container,
// leaving out what runc or the mounts provide (pts, shm, mqueue, the
// console and ptmx) and udev's private dirs.
func hostDevices() ([]specs.LinuxDevice, error) {
	skip := map[string]bool{"pts": true, "shm": true, "mqueue": true, "fd": true, "console": true,
		"ptmx": true, ".udev": true, ".lxc": true}
	var devs []specs.LinuxDevice
	err := filepath.WalkDir(hostDevDir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // a device dir we cannot read is left out
		}
		rel, _ := filepath.Rel(hostDevDir, p)
		if skip[rel] {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if e.Type()&(fs.ModeDevice|fs.ModeCharDevice) == 0 {
			return nil
		}
		d, err := deviceAt(p)
		if err != nil {
			return nil
		}
		d.Path = path.Join("/dev", filepath.ToSlash(rel))
		devs = append(devs, d)
		return nil
	})
	return devs, err
}
