package ocispec

import (
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The RuntimeDefault profile of this runtime, written for it (not a copy of
// Docker's or containerd's). Its approach:
//
//   - An allowlist: the default action is EPERM, and the rules allow what
//     ordinary programs use, grouped by purpose below. A syscall the kernel
//     adds later is denied until it is listed (runc answers ENOSYS for
//     syscalls newer than the profile knows, so libc falls back).
//   - Syscalls acting on kernel-global state that namespaces do not isolate
//     are allowed only to a process holding the capability the kernel
//     checks for them (capGated): mount and namespace creation with
//     CAP_SYS_ADMIN, module loading with CAP_SYS_MODULE, clock setting with
//     CAP_SYS_TIME, reboot with CAP_SYS_BOOT... Without the capability the
//     kernel would refuse most of them anyway; the filter removes the
//     attack surface of the code paths that refuse late.
//   - Some are never allowed, whatever the capabilities: the kernel
//     keyring (keyctl, add_key, request_key: keys are not namespaced),
//     kexec, swapon/swapoff, io_uring (a history of escapes), userfaultfd,
//     and the obsolete ones (uselib, nfsservctl, _sysctl, vm86...).
//   - Flags are checked where a syscall is harmless but for some flags:
//     clone and unshare are allowed without CAP_SYS_ADMIN only when they
//     create no namespace; clone3 (whose flags seccomp cannot read) then
//     fails with ENOSYS so that libc falls back to clone; personality is
//     allowed only for the usual personalities (Linux, Linux32, UNAME26,
//     and the query 0xffffffff).
//   - ptrace is allowed to all from kernel 4.8 on (before it, a traced
//     process could bypass seccomp), and to CAP_SYS_PTRACE holders always.
//   - socket is allowed for every address family but AF_ALG (the kernel's
//     crypto API, a history of bugs reachable from any process) and
//     AF_VSOCK (the host's and other VMs' sockets), as containerd denies
//     both (socketcall, the 32-bit x86 multiplexer whose arguments seccomp
//     cannot read, stays allowed as in containerd's).
//   - uretprobe is allowed: the kernel (6.11 on) calls it from the
//     trampoline of a return probe a tracer put in the process; denied, a
//     traced program would crash (containerd allows it too).
//
// It is at least as strict as containerd's default (compared with
// containerd's main branch of August 2026): every syscall allowed here
// unconditionally is allowed there too, but for the architecture-specific
// ones containerd lists per architecture; the legacy signal calls
// (signal, sigaction...) and olduname are not allowed, and get_mempolicy
// only with CAP_SYS_NICE, as there.
func DefaultSeccomp(caps []string) *specs.LinuxSeccomp {
	return defaultSeccomp(caps, kernelVersion())
}

func defaultSeccomp(caps []string, kernel [2]int) *specs.LinuxSeccomp {
	eperm := uint(unix.EPERM)
	s := &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: &eperm,
		Architectures:   nativeArches(),
	}
	allowed := slices.Concat(fileCalls, ioCalls, memoryCalls, processCalls, signalCalls,
		timeCalls, ipcCalls, netCalls, archCalls)
	for _, g := range capGated {
		if slices.Contains(caps, g.cap) {
			allowed = append(allowed, g.names...)
		}
	}
	if !kernelLess(kernel, [2]int{4, 8}) {
		allowed = append(allowed, "ptrace")
	}
	slices.Sort(allowed)
	s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{Names: slices.Compact(allowed), Action: specs.ActAllow})
	s.Syscalls = append(s.Syscalls, personalityRules()...)
	s.Syscalls = append(s.Syscalls, socketRules()...)
	if !slices.Contains(caps, "CAP_SYS_ADMIN") {
		s.Syscalls = append(s.Syscalls, noNamespaceRules()...)
	}
	return s
}

// namespaceFlags are the CLONE_NEW* bits: clone or unshare with any of
// them makes a namespace.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWTIME

// noNamespaceRules allow clone and unshare whose flags hold no CLONE_NEW*
// bit, and make clone3 fail with ENOSYS. (With CAP_SYS_ADMIN all three are
// in the capGated list instead.)
func noNamespaceRules() []specs.LinuxSyscall {
	enosys := uint(unix.ENOSYS)
	noNew := []specs.LinuxSeccompArg{{Index: 0, Value: namespaceFlags, ValueTwo: 0, Op: specs.OpMaskedEqual}}
	return []specs.LinuxSyscall{
		{Names: []string{"clone", "unshare"}, Action: specs.ActAllow, Args: noNew},
		{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
	}
}

// socketRules allow socket(2) for every address family below AF_ALG (38),
// AF_ALG+1 (39, AF_NFC) and every one above AF_VSOCK (40): AF_ALG and
// AF_VSOCK match no rule and get the default EPERM. Three single-condition
// rules rather than one rule with two "not equal" conditions: runc gives
// libseccomp each condition on the same argument as a rule of its own,
// which would allow both families (containerd's profile says why).
func socketRules() []specs.LinuxSyscall {
	rule := func(op specs.LinuxSeccompOperator, v uint64) specs.LinuxSyscall {
		return specs.LinuxSyscall{Names: []string{"socket"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: v, Op: op}}}
	}
	return []specs.LinuxSyscall{
		rule(specs.OpLessThan, unix.AF_ALG),
		rule(specs.OpEqualTo, unix.AF_ALG+1),
		rule(specs.OpGreaterThan, unix.AF_VSOCK),
	}
}

// personalityRules allow the personalities programs set for themselves:
// PER_LINUX (0), PER_LINUX32 (8), UNAME26 alone or with PER_LINUX32, and
// the query 0xffffffff. Others (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC...)
// weaken the process's defences and are denied.
func personalityRules() []specs.LinuxSyscall {
	var rules []specs.LinuxSyscall
	for _, v := range []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff} {
		rules = append(rules, specs.LinuxSyscall{
			Names:  []string{"personality"},
			Action: specs.ActAllow,
			Args:   []specs.LinuxSeccompArg{{Index: 0, Value: v, Op: specs.OpEqualTo}},
		})
	}
	return rules
}

// capGate is a group of syscalls allowed to holders of a capability.
type capGate struct {
	cap   string
	names []string
}

var capGated = []capGate{
	{"CAP_SYS_ADMIN", []string{
		"mount", "umount", "umount2", "mount_setattr", "move_mount", "open_tree",
		"fsopen", "fsconfig", "fsmount", "fspick", "pivot_root", "setns", "unshare",
		"clone", "clone3", "sethostname", "setdomainname", "quotactl", "quotactl_fd",
		"fanotify_init", "lookup_dcookie", "bpf", "perf_event_open", "syslog",
	}},
	{"CAP_BPF", []string{"bpf"}},
	{"CAP_PERFMON", []string{"perf_event_open"}},
	{"CAP_SYSLOG", []string{"syslog"}},
	{"CAP_SYS_BOOT", []string{"reboot"}},
	{"CAP_SYS_CHROOT", []string{"chroot"}},
	{"CAP_SYS_MODULE", []string{"init_module", "finit_module", "delete_module"}},
	{"CAP_SYS_PACCT", []string{"acct"}},
	{"CAP_SYS_PTRACE", []string{"ptrace", "kcmp", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd"}},
	{"CAP_SYS_RAWIO", []string{"iopl", "ioperm"}},
	{"CAP_SYS_TIME", []string{"settimeofday", "stime", "clock_settime", "clock_settime64"}},
	{"CAP_SYS_TTY_CONFIG", []string{"vhangup"}},
	{"CAP_SYS_NICE", []string{"get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node", "move_pages", "migrate_pages"}},
	{"CAP_DAC_READ_SEARCH", []string{"open_by_handle_at", "name_to_handle_at"}},
}

// Syscalls allowed to every process, by purpose. 32-bit variants (…64,
// …32, _time64) are listed beside their 64-bit forms: the filter covers
// the compat architectures too, and runc ignores names an arch lacks.
var (
	fileCalls = []string{
		"access", "faccessat", "faccessat2", "chdir", "fchdir", "getcwd",
		"chmod", "fchmod", "fchmodat", "fchmodat2",
		"chown", "chown32", "fchown", "fchown32", "fchownat", "lchown", "lchown32",
		"open", "openat", "openat2", "creat", "close", "close_range",
		"dup", "dup2", "dup3", "fcntl", "fcntl64", "flock",
		"read", "readv", "pread64", "preadv", "preadv2",
		"write", "writev", "pwrite64", "pwritev", "pwritev2",
		"lseek", "_llseek", "sendfile", "sendfile64", "splice", "tee", "vmsplice", "copy_file_range",
		"stat", "stat64", "lstat", "lstat64", "fstat", "fstat64", "fstatat64", "newfstatat", "statx",
		"statfs", "statfs64", "fstatfs", "fstatfs64",
		"truncate", "truncate64", "ftruncate", "ftruncate64", "fallocate",
		"fadvise64", "fadvise64_64", "readahead", "cachestat",
		"fsync", "fdatasync", "sync", "syncfs", "sync_file_range",
		"getdents", "getdents64", "mkdir", "mkdirat", "rmdir", "mknod", "mknodat",
		"link", "linkat", "symlink", "symlinkat", "unlink", "unlinkat",
		"rename", "renameat", "renameat2", "readlink", "readlinkat",
		"umask", "utime", "utimes", "futimesat", "utimensat", "utimensat_time64",
		"getxattr", "lgetxattr", "fgetxattr", "getxattrat", "setxattr", "lsetxattr", "fsetxattr", "setxattrat",
		"listxattr", "llistxattr", "flistxattr", "listxattrat",
		"removexattr", "lremovexattr", "fremovexattr", "removexattrat",
		"inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch", "fanotify_mark",
		"memfd_create", "memfd_secret",
		"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
	}
	ioCalls = []string{
		"ioctl", "poll", "ppoll", "ppoll_time64", "select", "_newselect", "pselect6", "pselect6_time64",
		"epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_wait", "epoll_wait_old",
		"epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "signalfd", "signalfd4",
		"timerfd_create", "timerfd_settime", "timerfd_settime64", "timerfd_gettime", "timerfd_gettime64",
		"io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents", "io_pgetevents_time64",
		"ioprio_get", "ioprio_set", "pipe", "pipe2",
	}
	memoryCalls = []string{
		"brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "msync", "madvise", "mincore",
		"mlock", "mlock2", "mlockall", "munlock", "munlockall", "remap_file_pages", "membarrier",
		"pkey_alloc", "pkey_free", "pkey_mprotect", "map_shadow_stack", "mseal",
	}
	processCalls = []string{
		"execve", "execveat", "fork", "vfork", "exit", "exit_group", "wait4", "waitid", "waitpid",
		"getpid", "getppid", "gettid", "getpgid", "getpgrp", "getsid", "setpgid", "setsid",
		"getuid", "getuid32", "geteuid", "geteuid32", "getgid", "getgid32", "getegid", "getegid32",
		"getresuid", "getresuid32", "getresgid", "getresgid32", "getgroups", "getgroups32",
		"setuid", "setuid32", "setgid", "setgid32", "setreuid", "setreuid32", "setregid", "setregid32",
		"setresuid", "setresuid32", "setresgid", "setresgid32", "setfsuid", "setfsuid32",
		"setfsgid", "setfsgid32", "setgroups", "setgroups32", "capget", "capset",
		"getrlimit", "ugetrlimit", "setrlimit", "prlimit64", "getrusage", "times", "getpriority", "setpriority",
		"sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_setparam",
		"sched_getscheduler", "sched_setscheduler", "sched_getattr", "sched_setattr",
		"sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval", "sched_rr_get_interval_time64",
		"prctl", "seccomp", "set_tid_address", "set_robust_list", "get_robust_list", "rseq",
		"futex", "futex_time64", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue",
		"getrandom", "uname", "sysinfo", "getcpu", "restart_syscall",
		"pidfd_open", "pidfd_send_signal", "uretprobe",
	}
	signalCalls = []string{
		"kill", "tkill", "tgkill", "pause", "sigaltstack", "sigprocmask", "sigreturn", "rt_sigaction", "rt_sigprocmask", "rt_sigpending", "rt_sigsuspend",
		"rt_sigreturn", "rt_sigtimedwait", "rt_sigtimedwait_time64", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
	}
	timeCalls = []string{
		"time", "gettimeofday", "clock_gettime", "clock_gettime64", "clock_getres", "clock_getres_time64",
		"clock_nanosleep", "clock_nanosleep_time64", "nanosleep", "alarm", "getitimer", "setitimer",
		"timer_create", "timer_delete", "timer_getoverrun", "timer_gettime", "timer_gettime64",
		"timer_settime", "timer_settime64", "adjtimex", "clock_adjtime", "clock_adjtime64",
	}
	ipcCalls = []string{
		"ipc", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop", "semtimedop_time64",
		"semctl", "shmget", "shmat", "shmdt", "shmctl", "mq_open", "mq_unlink", "mq_timedsend",
		"mq_timedsend_time64", "mq_timedreceive", "mq_timedreceive_time64", "mq_notify", "mq_getsetattr",
	}
	netCalls = []string{
		"socketpair", "socketcall", "bind", "connect", "listen", "accept", "accept4", "shutdown",
		"getsockname", "getpeername", "getsockopt", "setsockopt", "send", "sendto", "sendmsg", "sendmmsg",
		"recv", "recvfrom", "recvmsg", "recvmmsg", "recvmmsg_time64",
	}
	archCalls = []string{
		"arch_prctl", "set_thread_area", "get_thread_area", // x86
		"set_tls", "cacheflush", "breakpoint", "arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", // arm
	}
)
