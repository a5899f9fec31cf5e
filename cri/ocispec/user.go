package ocispec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/sys/user"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// userRequest is what a config asks of the process's identity.
type userRequest struct {
	uid          *int64 // run_as_user
	username     string // run_as_username
	gid          *int64 // run_as_group
	supplemental []int64
	strict       bool   // supplemental_groups_policy Strict: no groups from /etc/group
	image        string // the image's User, used when the config names no user
}

// containerUser resolves the process's uid, gid and groups: the config's
// run_as_user or run_as_username, else the image's User ("uid", "uid:gid",
// "name", "name:group"...; empty is root). Names are looked up in the
// rootfs's /etc/passwd and /etc/group, read as every file of an image is
// (readImageFile: symlinks resolved within the rootfs, never on the host;
// regular files only, bounded). Unless the
// policy is Strict, the groups listing the user in /etc/group are added,
// then the config's supplemental groups; the primary group comes first.
func containerUser(scope, rootfs string, r userRequest) (specs.User, error) {
	var none specs.User
	spec, field, err := userSpec(r)
	if err != nil {
		return none, fieldError(scope, field, err)
	}
	passwd, group, err := openUserFiles(rootfs)
	if err != nil {
		return none, fieldError(scope, field, err)
	}
	eu, err := user.GetExecUser(spec, nil, passwd, group)
	if err != nil {
		return none, fieldError(scope, field, err)
	}
	// The primary group is listed too, as the CRI's ContainerUser reports
	// it among the supplemental groups (and the kernel has it either way).
	u := specs.User{UID: uint32(eu.Uid), GID: uint32(eu.Gid), Username: r.username, AdditionalGids: []uint32{uint32(eu.Gid)}}
	if !r.strict {
		for _, g := range eu.Sgids {
			u.AdditionalGids = appendGid(u.AdditionalGids, uint32(g))
		}
	}
	for i, g := range r.supplemental {
		if g < 0 || g > 1<<32-2 {
			return none, fieldErrorf(scope, fmt.Sprintf("supplemental_groups[%d]", i), "gid %d out of range", g)
		}
		u.AdditionalGids = appendGid(u.AdditionalGids, uint32(g))
	}
	return u, nil
}

// userSpec turns the request into a "user[:group]" string for
// moby/sys/user, and names the field it came from for errors.
func userSpec(r userRequest) (string, string, error) {
	switch {
	case r.uid != nil && r.username != "":
		return "", "run_as_user", errors.New("run_as_user and run_as_username are both set")
	case r.gid != nil && r.uid == nil && r.username == "":
		return "", "run_as_group", errors.New("run_as_group needs run_as_user or run_as_username")
	}
	var spec, field string
	switch {
	case r.uid != nil:
		if *r.uid < 0 || *r.uid > 1<<32-2 {
			return "", "run_as_user", fmt.Errorf("uid %d out of range", *r.uid)
		}
		spec, field = strconv.FormatInt(*r.uid, 10), "run_as_user"
	case r.username != "":
		if _, err := strconv.Atoi(r.username); err == nil {
			// A numeric name would be taken as a uid by the parser.
			return "", "run_as_username", fmt.Errorf("user name %q is numeric: use run_as_user", r.username)
		}
		spec, field = r.username, "run_as_username"
	default:
		return r.image, "image user", nil
	}
	if r.gid != nil {
		if *r.gid < 0 || *r.gid > 1<<32-2 {
			return "", "run_as_group", fmt.Errorf("gid %d out of range", *r.gid)
		}
		spec += ":" + strconv.FormatInt(*r.gid, 10)
	}
	return spec, field, nil
}

// openUserFiles reads /etc/passwd and /etc/group of the rootfs
// (readImageFile: within the rootfs, regular files only, bounded); a
// missing file is a nil reader (numeric ids need none). An empty rootfs
// reads nothing.
func openUserFiles(rootfs string) (io.Reader, io.Reader, error) {
	if rootfs == "" {
		return nil, nil, nil
	}
	passwd, err := userFile(rootfs, "/etc/passwd")
	if err != nil {
		return nil, nil, err
	}
	group, err := userFile(rootfs, "/etc/group")
	return passwd, group, err
}

// userFile is one of the files names are looked up in; nil when missing.
func userFile(rootfs, name string) (io.Reader, error) {
	data, err := readImageFile(rootfs, name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(data), nil
}

func appendGid(gids []uint32, g uint32) []uint32 {
	if slices.Contains(gids, g) {
		return gids
	}
	return append(gids, g)
}

// containerUserRequest reads the identity fields of a container config.
func containerUserRequest(sc *runtime.LinuxContainerSecurityContext, imageUser string) userRequest {
	r := userRequest{
		username:     sc.GetRunAsUsername(),
		supplemental: sc.GetSupplementalGroups(),
		strict:       sc.GetSupplementalGroupsPolicy() == runtime.SupplementalGroupsPolicy_Strict,
		image:        strings.TrimSpace(imageUser),
	}
	if v := sc.GetRunAsUser(); v != nil {
		r.uid = &v.Value
	}
	if v := sc.GetRunAsGroup(); v != nil {
		r.gid = &v.Value
	}
	return r
}
