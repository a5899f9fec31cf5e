// Command testinit is the init process of the test containers. It is built
// static (CGO_ENABLED=0) and copied into each test rootfs, so the tests need
// no distribution image and no download.
//
// Its arguments are steps separated by "--", run in order:
//
//	echo WORDS...     print WORDS to stdout
//	stderr WORDS...   print WORDS to stderr
//	cat               copy stdin to stdout until EOF
//	sleep D|forever   sleep for a Go duration, or until killed
//	exit N            exit with status N
//	stamp [FILE]      print "STAMP <unix ns>" (to FILE, appending, if given) and exit 0 at once;
//	                  the benchmarks measure from this instant to the exit event
//	alloc [MiB]       allocate and touch memory, 1 MiB at a time, up to MiB or until killed
//	fork N            start N children that sleep until killed, print their pids
//	ignore SIG...     ignore the signals (e.g. TERM)
//	trap SIG...       print "trapped SIG" on each of these signals and go on
//	winsize           print "winsize ROWSxCOLS" now and after each SIGWINCH, until killed
//	ready FILE        create FILE (in the container) to say the steps before it are done
//	pid               print "pid N" of this process
//	mkdir DIR         try to make DIR; print "mkdir DIR: ok" or "mkdir DIR: <error>" and go on
//	                  (the seccomp test denies the syscall and reads which it was)
//	owner PATH        print "owner PATH: UID:GID" of the file (as this process's namespace sees it),
//	                  or "owner PATH: <error>"
//	file PATH         print "file PATH: " and the file's content, spaces for newlines (uid_map)
//	capeff            print "capeff HEX", the effective capability set from /proc/self/status
//	status FIELD...   print "FIELD: VALUE" for these fields of /proc/self/status (Uid, Groups...)
//	syscall NAME      try a syscall a seccomp profile may deny (keyctl, personality,
//	                  socket-alg, socket-vsock, socket-inet);
//	                  print "syscall NAME: ok" or "syscall NAME: <error>"
//	serve PORT WORDS  in the background, answer each TCP connection to PORT (all addresses) with
//	                  WORDS and a newline, then close it, while the next steps run
//	dial ADDR         connect to TCP ADDR (host:port), print "dial ADDR: " and what it answered
//	                  (its first line), or "dial ADDR: <error>"; go on either way
//	flood             write to stdout without end (blocks once nobody reads), until killed
//	flood-bg          the same in the background, while the next steps run (a process whose
//	                  exit comes while its output is unread: the exit benchmarks)
//	fill N FD         write N bytes ('x') to fd FD (1 or 2), then go on
//	await PATH        wait (inotify, no polling) until PATH exists
//	device PATH       print "device PATH: TYPE MAJOR:MINOR, open: ok" (TYPE c or b; the open for
//	                  writing is what the device cgroup allows or not), or "device PATH: <error>"
//	env NAME          print "env NAME=VALUE", or "env NAME unset"
//	exec PATH ARGS... replace this process by PATH (execve), giving it ARGS and the steps after
//	                  this one (a set-uid copy of testinit then runs them with its identity)
//
// With no arguments it sleeps until killed.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	steps := split(os.Args[1:])
	if len(steps) == 0 {
		steps = [][]string{{"sleep", "forever"}}
	}
	for i, step := range steps {
		if step[0] == "exec" {
			execRest(step[1:], steps[i+1:])
		}
		if err := run(step); err != nil {
			fmt.Fprintf(os.Stderr, "testinit: %s: %v\n", step[0], err)
			os.Exit(120)
		}
	}
}

// execRest replaces the process by args[0] with args[1:] and the rest of
// the steps as its arguments; it returns only by exiting on an error.
func execRest(args []string, rest [][]string) {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "testinit: exec: no program")
		os.Exit(120)
	}
	argv := args
	for _, step := range rest {
		argv = append(append(argv, "--"), step...)
	}
	err := syscall.Exec(args[0], argv, os.Environ())
	fmt.Fprintf(os.Stderr, "testinit: exec %s: %v\n", args[0], err)
	os.Exit(120)
}

func split(args []string) [][]string {
	var steps [][]string
	var cur []string
	for _, a := range args {
		if a == "--" {
			if len(cur) > 0 {
				steps = append(steps, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, a)
	}
	if len(cur) > 0 {
		steps = append(steps, cur)
	}
	return steps
}

func run(step []string) error {
	args := step[1:]
	switch step[0] {
	case "echo":
		_, err := fmt.Println(strings.Join(args, " "))
		return err
	case "stderr":
		_, err := fmt.Fprintln(os.Stderr, strings.Join(args, " "))
		return err
	case "cat":
		_, err := io.Copy(os.Stdout, os.Stdin)
		return err
	case "sleep":
		return sleep(args)
	case "exit":
		code, err := strconv.Atoi(first(args))
		if err != nil {
			return err
		}
		os.Exit(code)
	case "stamp":
		return stamp(args)
	case "alloc":
		return alloc(args)
	case "fork":
		return fork(args)
	case "fork-inherit":
		return forkInherit()
	case "ignore":
		return handle(args, func(s os.Signal) { signal.Ignore(s) })
	case "trap":
		return trap(args)
	case "winsize":
		return winsize()
	case "ready":
		return os.WriteFile(first(args), nil, 0o644)
	case "pid":
		_, err := fmt.Printf("pid %d\n", os.Getpid())
		return err
	case "mkdir":
		return tryMkdir(first(args))
	case "owner":
		return owner(first(args))
	case "file":
		return printFile(first(args))
	case "device":
		return device(first(args))
	case "env":
		if v, ok := os.LookupEnv(first(args)); ok {
			_, err := fmt.Printf("env %s=%s\n", first(args), v)
			return err
		}
		_, err := fmt.Printf("env %s unset\n", first(args))
		return err
	case "capeff":
		return capEff()
	case "status":
		return status(args)
	case "syscall":
		return trySyscall(first(args))
	case "flood":
		return flood()
	case "flood-bg":
		go flood()
		return nil
	case "serve":
		return serve(first(args), strings.Join(args[min(1, len(args)):], " "))
	case "dial":
		return dial(first(args))
	case "fill":
		return fill(args)
	case "await":
		return await(first(args))
	case "child-sleep":
		// used by fork: the children just wait to be killed
		sleepForever()
	}
	return fmt.Errorf("unknown step %q", step[0])
}

// serve listens on port and answers every connection with text, in the
// background.
func serve(port, text string) error {
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, text)
			c.Close()
		}
	}()
	return nil
}

// dial prints the first line addr answers, or why it could not.
func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		_, err = fmt.Printf("dial %s: %v\n", addr, err)
		return err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		_, err = fmt.Printf("dial %s: %v\n", addr, err)
		return err
	}
	_, err = fmt.Printf("dial %s: %s", addr, line)
	return err
}

// flood writes to stdout until a write fails: with a client that does not
// read, it blocks once the pipes are full, as a chatty service would.
func flood() error {
	line := []byte(strings.Repeat("x", 1023) + "\n")
	for {
		if _, err := os.Stdout.Write(line); err != nil {
			return err
		}
	}
}

func first(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// capEff prints the process's effective capability set as the kernel
// shows it ("capeff 00000000000000a0"), for tests of the capabilities a
// runtime gave an exec.
func capEff() error {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			_, err := fmt.Printf("capeff %s\n", strings.TrimSpace(v))
			return err
		}
	}
	return errors.New("no CapEff in /proc/self/status")
}

// status prints the named fields of /proc/self/status, in the order asked.
func status(fields []string) error {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for _, f := range fields {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, f+":"); ok {
				fmt.Printf("%s: %s\n", f, strings.Join(strings.Fields(v), " "))
			}
		}
	}
	return nil
}

// trySyscall makes one syscall that an unprivileged process may make but a
// seccomp profile may deny, and reports the outcome like tryMkdir.
func trySyscall(name string) error {
	var errno syscall.Errno
	switch name {
	case "keyctl": // KEYCTL_GET_KEYRING_ID of the session keyring
		_, _, errno = syscall.Syscall(syscall.SYS_KEYCTL, 0, 0xfffffffd, 0)
	case "personality": // ADDR_NO_RANDOMIZE, then back to the default
		_, _, errno = syscall.Syscall(syscall.SYS_PERSONALITY, 0x0040000, 0, 0)
		syscall.Syscall(syscall.SYS_PERSONALITY, 0, 0, 0)
	case "socket-alg", "socket-vsock", "socket-inet":
		errno = trySocket(name)
	default:
		return fmt.Errorf("unknown syscall %q", name)
	}
	result := "ok"
	if errno != 0 {
		result = errno.Error()
	}
	_, err := fmt.Printf("syscall %s: %s\n", name, result)
	return err
}

// tryMkdir reports the outcome rather than failing the init: the caller
// asserts on which error the kernel (or a seccomp filter) gave.
func tryMkdir(dir string) error {
	result := "ok"
	if err := os.Mkdir(dir, 0o755); err != nil {
		result = errors.Unwrap(err).Error()
	}
	_, err := fmt.Printf("mkdir %s: %s\n", dir, result)
	return err
}

func owner(path string) error {
	result := ""
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		result = err.Error()
	} else {
		result = fmt.Sprintf("%d:%d", st.Uid, st.Gid)
	}
	_, err := fmt.Printf("owner %s: %s\n", path, result)
	return err
}

func device(path string) error {
	var st syscall.Stat_t
	result := ""
	if err := syscall.Stat(path, &st); err != nil {
		result = err.Error()
	} else {
		typ := map[uint32]string{syscall.S_IFCHR: "c", syscall.S_IFBLK: "b"}[st.Mode&syscall.S_IFMT]
		if typ == "" {
			typ = fmt.Sprintf("not a device (mode %o)", st.Mode)
		}
		dev := uint64(st.Rdev)
		result = fmt.Sprintf("%s %d:%d, open: ", typ, (dev>>8)&0xfff|(dev>>32)&^0xfff, dev&0xff|(dev>>12)&^0xff)
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err != nil {
			result += err.Error()
		} else {
			f.Close()
			result += "ok"
		}
	}
	_, err := fmt.Printf("device %s: %s\n", path, result)
	return err
}

func printFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	_, err = fmt.Printf("file %s: %s\n", path, strings.Join(strings.Fields(string(data)), " "))
	return err
}

func sleep(args []string) error {
	if first(args) == "forever" || len(args) == 0 {
		sleepForever()
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		return err
	}
	time.Sleep(d)
	return nil
}

// sleepForever blocks until a signal kills the process. A bare select{}
// would not do: with no other goroutine the Go runtime calls it a deadlock.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

func stamp(args []string) error {
	line := fmt.Sprintf("STAMP %d\n", time.Now().UnixNano())
	if len(args) > 0 {
		f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.WriteString(line); err != nil {
			return err
		}
		f.Close()
	} else {
		os.Stdout.WriteString(line)
	}
	os.Exit(0)
	return nil
}

// held keeps allocated memory reachable so the GC cannot give it back.
var held [][]byte

func alloc(args []string) error {
	limit := -1
	if len(args) > 0 {
		n, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		limit = n
	}
	for i := 0; limit < 0 || i < limit; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		held = append(held, b)
	}
	fmt.Printf("allocated %d MiB\n", len(held))
	return nil
}

func fork(args []string) error {
	n, err := strconv.Atoi(first(args))
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		cmd := exec.Command("/proc/self/exe", "child-sleep")
		if err := cmd.Start(); err != nil {
			return err
		}
		fmt.Printf("child %d\n", cmd.Process.Pid)
	}
	return nil
}

// forkInherit starts a child that sleeps holding this process's stdout
// and stderr (a shell's "cmd &"), and prints its pid.
func forkInherit() error {
	cmd := exec.Command("/proc/self/exe", "child-sleep")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	_, err := fmt.Printf("child %d\n", cmd.Process.Pid)
	return err
}

func handle(names []string, fn func(os.Signal)) error {
	for _, name := range names {
		sig, err := parseSignal(name)
		if err != nil {
			return err
		}
		fn(sig)
	}
	return nil
}

func trap(names []string) error {
	ch := make(chan os.Signal, 16)
	if err := handle(names, func(s os.Signal) { signal.Notify(ch, s) }); err != nil {
		return err
	}
	go func() {
		for s := range ch {
			fmt.Printf("trapped %s\n", strings.TrimPrefix(signalName(s), "SIG"))
		}
	}()
	return nil
}

func parseSignal(name string) (syscall.Signal, error) {
	name = strings.TrimPrefix(strings.ToUpper(name), "SIG")
	table := map[string]syscall.Signal{
		"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "TERM": syscall.SIGTERM,
		"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "QUIT": syscall.SIGQUIT,
	}
	if s, ok := table[name]; ok {
		return s, nil
	}
	return 0, fmt.Errorf("unknown signal %q", name)
}

func signalName(s os.Signal) string {
	for _, n := range []string{"HUP", "INT", "TERM", "USR1", "USR2", "QUIT"} {
		if sig, _ := parseSignal(n); sig == s {
			return n
		}
	}
	return s.String()
}

func winsize() error {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGWINCH)
	out := bufio.NewWriter(os.Stdout)
	for {
		var ws struct{ Row, Col, X, Y uint16 }
		_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws)))
		if errno != 0 {
			return errno
		}
		fmt.Fprintf(out, "winsize %dx%d\n", ws.Row, ws.Col)
		out.Flush()
		<-ch
	}
}
