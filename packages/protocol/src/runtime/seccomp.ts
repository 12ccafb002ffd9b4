// The seccomp deny list both runtimes apply to every sandboxed process (docs/contract.md §4). Data only:
// runtime-bwrap compiles it to BPF with libseccomp (its `agentfense-seccomp` exporter, built by
// scripts/setup), runtime-docker turns it into a Docker seccomp profile. Everything not listed is allowed:
// this is a deny list of what an agent never needs and what reaches kernel state shared with the host.
//
// Baseline: Docker's default profile (moby profiles/seccomp/default.json) for a container without extra
// capabilities, plus the new mount API, io_uring and name_to_handle_at. Denied calls fail with EPERM
// (never kill the process), so tools that probe a feature degrade gracefully; clone3 answers ENOSYS so
// that glibc falls back to clone(2), whose flags a filter can inspect (clone3 passes them in memory).
//
// Deliberately allowed (decisions in docs/decisions.md, "One seccomp deny list for both runtimes"):
// - ptrace, process_vm_readv/writev, kcmp, pidfd_getfd: the sandbox has its own pid namespace, so it can
//   only name (and trace) its own processes; the kernel's ptrace access check (same uid, no capabilities)
//   applies on top. Agents need strace/gdb. A process outside the sandbox has no pid inside it.
// - personality: Docker allows only a few values; the remaining flags (ADDR_NO_RANDOMIZE,
//   READ_IMPLIES_EXEC) only weaken the calling process itself, not the host or other sandboxes.
// - chroot, sethostname, setdomainname: the kernel refuses them without capabilities, which the sandbox
//   user never has; in its own UTS namespace they would be harmless anyway.

/** One group of denied syscalls and why an agent never needs them. */
export interface SeccompDenyGroup {
  readonly why: string;
  /** Syscall names as libseccomp knows them; names a given architecture lacks are skipped there. */
  readonly syscalls: readonly string[];
}

/** A syscall denied only when an argument matches: `(args[arg] & mask) === value`. */
export interface SeccompArgRule {
  readonly syscall: string;
  readonly arg: number;
  readonly mask: number;
  readonly value: number;
  readonly why: string;
}

/** The errno a denied syscall returns (EPERM). */
export const SECCOMP_DENY_ERRNO = 1;
/** clone3 answers ENOSYS so callers fall back to clone(2), whose flags the filter can check. */
export const SECCOMP_ENOSYS_SYSCALLS: readonly string[] = ['clone3'];
export const SECCOMP_ENOSYS_ERRNO = 38;

/** Syscalls denied outright, grouped by reason. */
export const SECCOMP_DENY_GROUPS: readonly SeccompDenyGroup[] = [
  {
    why: 'mounting: a sandbox must never change its (or the host) mount tree; bwrap built it already',
    syscalls: [
      'mount',
      'umount',
      'umount2',
      'pivot_root',
      'move_mount',
      'open_tree',
      'fsopen',
      'fsconfig',
      'fsmount',
      'fspick',
      'mount_setattr',
    ],
  },
  {
    why: 'kernel code: loading, replacing or removing kernel code is a host takeover',
    syscalls: [
      'kexec_load',
      'kexec_file_load',
      'init_module',
      'finit_module',
      'delete_module',
      'create_module',
      'query_module',
      'get_kernel_syms',
    ],
  },
  {
    why: 'in-kernel programs and tracing: bpf and perf events are a large attack surface and observe the host',
    syscalls: ['bpf', 'perf_event_open', 'lookup_dcookie'],
  },
  {
    why: 'kernel keyrings are not namespaced: keys could be read or planted across sandboxes',
    syscalls: ['keyctl', 'add_key', 'request_key'],
  },
  {
    why: 'userfaultfd stalls kernel page faults at will, the classic tool for widening kernel race windows',
    syscalls: ['userfaultfd'],
  },
  {
    why: 'namespaces: joining or creating namespaces is how container escapes start (unshare and clone with namespace flags are filtered by flag below)',
    syscalls: ['setns'],
  },
  {
    why: 'host state: rebooting, swap, process accounting and the system clock belong to the host',
    syscalls: [
      'reboot',
      'swapon',
      'swapoff',
      'acct',
      'settimeofday',
      'stime',
      'clock_settime',
      'clock_adjtime',
      'adjtimex',
      'vhangup',
      'syslog',
    ],
  },
  {
    why: 'disk quotas are set by the host, not by a tenant',
    syscalls: ['quotactl', 'quotactl_fd'],
  },
  {
    why: 'file handles bypass path permissions (the "shocker" escape used open_by_handle_at)',
    syscalls: ['open_by_handle_at', 'name_to_handle_at'],
  },
  {
    why: 'raw I/O ports and virtual-8086 mode: direct hardware access',
    syscalls: ['iopl', 'ioperm', 'vm86', 'vm86old'],
  },
  {
    why: 'obsolete interfaces with a history of kernel bugs and no use in a modern userland',
    syscalls: ['nfsservctl', 'uselib', 'sysfs', '_sysctl', 'ustat'],
  },
  {
    why: 'filesystem-wide notification (fanotify) watches mounts beyond the sandbox',
    syscalls: ['fanotify_init'],
  },
  {
    why: 'io_uring: a large, fast-moving kernel surface (Docker and Chrome OS block it too); ordinary I/O works without it',
    syscalls: ['io_uring_setup', 'io_uring_enter', 'io_uring_register'],
  },
  {
    why: "NUMA memory placement is the host scheduler's business (Docker denies it without CAP_SYS_NICE)",
    syscalls: ['mbind', 'set_mempolicy', 'migrate_pages', 'move_pages'],
  },
];

/** Namespace flags of clone(2)/unshare(2) (CLONE_NEWTIME, _NEWNS, _NEWCGROUP, _NEWUTS, _NEWIPC, _NEWUSER, _NEWPID, _NEWNET). */
export const NAMESPACE_FLAGS: Readonly<Record<string, number>> = {
  CLONE_NEWTIME: 0x00000080,
  CLONE_NEWNS: 0x00020000,
  CLONE_NEWCGROUP: 0x02000000,
  CLONE_NEWUTS: 0x04000000,
  CLONE_NEWIPC: 0x08000000,
  CLONE_NEWUSER: 0x10000000,
  CLONE_NEWPID: 0x20000000,
  CLONE_NEWNET: 0x40000000,
};

/**
 * unshare/clone with any namespace flag: a new user namespace would hand the process a full capability
 * set over a namespace of its own (and the kernel attack surface that comes with it); the other
 * namespaces need capabilities it does not have. Threads and plain forks (no such flag) are unaffected.
 * (x86-64 clone(2) has the flags in argument 0, as has unshare(2).)
 */
export const SECCOMP_ARG_RULES: readonly SeccompArgRule[] = Object.entries(NAMESPACE_FLAGS).flatMap(
  ([name, flag]) =>
    ['unshare', 'clone'].map((syscall) => ({
      syscall,
      arg: 0,
      mask: flag,
      value: flag,
      why: `${syscall} with ${name}: no new namespaces inside a sandbox`,
    })),
);

/** Every syscall denied outright (flattened SECCOMP_DENY_GROUPS). */
export const SECCOMP_DENIED_SYSCALLS: readonly string[] = SECCOMP_DENY_GROUPS.flatMap((g) => g.syscalls);

/**
 * The deny list as the line format of runtime-bwrap's libseccomp exporter (one rule per line):
 * `errno <n> <syscall>` or `errno-masked <n> <syscall> <arg> <mask> <value>`. Stable order, so a hash of
 * it names a compiled filter.
 */
export function seccompRuleLines(): string[] {
  return [
    ...SECCOMP_DENIED_SYSCALLS.map((s) => `errno ${SECCOMP_DENY_ERRNO} ${s}`),
    ...SECCOMP_ENOSYS_SYSCALLS.map((s) => `errno ${SECCOMP_ENOSYS_ERRNO} ${s}`),
    ...SECCOMP_ARG_RULES.map(
      (r) => `errno-masked ${SECCOMP_DENY_ERRNO} ${r.syscall} ${r.arg} ${r.mask} ${r.value}`,
    ),
  ];
}
