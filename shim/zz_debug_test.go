package main

import (
	"os"
	"fmt"
	"testing"
	"time"

	"github.com/evjournal/containerd/integration/fixture"
)

func TestZZHold(t *testing.T) {
	if os.Getenv("HOLD") == "" { t.Skip() }
	c := newContainer(t, fixture.Args("sleep", "1h"))
	defer c.remove(t)
	p := c.startShim(t, procOpts{stdin: true, stdout: true, stderr: true})
	p.started()
	c.mustRunc(t, "start", c.id)
	time.Sleep(time.Second)
	fmt.Println("SHIMPID", p.shimPid)
	os.WriteFile("/tmp/shimpid", []byte(fmt.Sprint(p.shimPid)), 0644)
	time.Sleep(60 * time.Second)
	c.mustRunc(t, "kill", c.id, "KILL")
	p.exited()
}
