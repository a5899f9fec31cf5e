// Command mkbundle makes an OCI bundle whose rootfs holds only the static
// test init, so the demo and the benchmarks need no image and no download.
//
//	mkbundle -testinit bin/testinit [-memory BYTES] [-tty] DIR [testinit steps...]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/evjournal/containerd/integration/fixture"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mkbundle:", err)
		os.Exit(1)
	}
}

func run() error {
	testinit := flag.String("testinit", "bin/testinit", "path of the static test init binary")
	memory := flag.Int64("memory", 0, "memory limit in bytes (0 = none)")
	tty := flag.Bool("tty", false, "give the init a terminal")
	flag.Parse()
	if flag.NArg() < 1 {
		return fmt.Errorf("usage: mkbundle [flags] DIR [steps...]")
	}
	dir := flag.Arg(0)
	if err := fixture.MakeRootfs(dir, *testinit); err != nil {
		return err
	}
	spec := fixture.DefaultSpec()
	if steps := flag.Args()[1:]; len(steps) > 0 {
		fixture.Args(steps...)(spec)
	}
	if *memory > 0 {
		fixture.MemoryLimit(*memory)(spec)
	}
	spec.Process.Terminal = *tty
	return fixture.WriteSpec(dir, spec)
}
