// Command leaver is copied into a test container by the shim tests: it
// starts a child that inherits its stdout and sleeps, prints "left", and
// exits 7, so its stdout stays open after it is gone.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		time.Sleep(time.Hour)
		return
	}
	child := exec.Command("/proc/self/exe", "child")
	child.Stdout = os.Stdout
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "leaver:", err)
		os.Exit(120)
	}
	fmt.Println("left")
	os.Exit(7)
}
