// Command mkbundle makes an OCI bundle whose rootfs holds only the static
// test init, so the demo and the benchmarks need no image and no download.
//
//	mkbundle -testinit bin/testinit [-memory BYTES] [-tty] DIR [testinit steps...]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

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
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range []string{"proc", "dev", "sys", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			return err
		}
	}
	if err := copyFile(*testinit, filepath.Join(rootfs, "testinit")); err != nil {
		return fmt.Errorf("copy test init: %w", err)
	}
	spec := fixture.DefaultSpec()
	if steps := flag.Args()[1:]; len(steps) > 0 {
		fixture.Args(steps...)(spec)
	}
	if *memory > 0 {
		fixture.MemoryLimit(*memory)(spec)
	}
	spec.Process.Terminal = *tty
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
