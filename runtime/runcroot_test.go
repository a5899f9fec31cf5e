package runtime

import "testing"

func TestRuncRoot(t *testing.T) {
	cases := []struct {
		runtime string
		args    []string
		root    string
		ok      bool
	}{
		{"runc", nil, "/run/runc", true},
		{"/usr/bin/runc", []string{"--root", "/x"}, "/x", true},
		{"runc", []string{"--debug", "--root=/y"}, "/y", true},
		{"docker-runc", []string{"--root", "/var/run/docker/runtime-runc/moby"}, "/var/run/docker/runtime-runc/moby", true}, // Docker 1.11-1.13
		{"/usr/bin/docker-runc", nil, "/run/runc", true},
		{"crun", []string{"--root", "/x"}, "", false},
		{"my-runc-wrapper", nil, "", false},
	}
	for _, c := range cases {
		root, ok := runcRoot(c.runtime, c.args)
		if root != c.root || ok != c.ok {
			t.Errorf("runcRoot(%q, %q) = %q, %v; want %q, %v", c.runtime, c.args, root, ok, c.root, c.ok)
		}
	}
}
