/*
 * agentfense-seccomp: compiles AgentFense's seccomp deny list (packages/protocol/src/runtime/seccomp.ts,
 * as seccompRuleLines() prints it) into a classic BPF program with libseccomp and writes it to stdout,
 * in the form `bwrap --seccomp FD` loads. Built by scripts/setup (cc ... -lseccomp).
 *
 * Input on stdin, one rule per line:
 *   errno <n> <syscall>                                  deny with errno n
 *   errno-masked <n> <syscall> <arg> <mask> <value>      deny with errno n when (args[arg] & mask) == value
 * Everything else is allowed. The native architecture is filtered, plus the 32-bit x86 and x32 ABIs on
 * x86-64 (otherwise a 32-bit binary's int 0x80 calls would bypass the list). Unknown syscall names are an
 * error (a typo must not silently drop a rule); names that do not exist on one of the architectures are
 * skipped there by libseccomp.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const char *detail, int rc) {
  fprintf(stderr, "agentfense-seccomp: %s %s: %s\n", what, detail, strerror(rc < 0 ? -rc : rc));
  return 1;
}

int main(void) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == NULL) return fail("seccomp_init", "", ENOMEM);
  int rc;
#if defined(__x86_64__)
  /* Already present archs answer -EEXIST: not an error. */
  rc = seccomp_arch_add(ctx, SCMP_ARCH_X86);
  if (rc != 0 && rc != -EEXIST) return fail("arch", "x86", rc);
  rc = seccomp_arch_add(ctx, SCMP_ARCH_X32);
  if (rc != 0 && rc != -EEXIST) return fail("arch", "x32", rc);
#endif
  char line[512];
  int rules = 0;
  while (fgets(line, sizeof line, stdin) != NULL) {
    char kind[32], name[128];
    int err;
    unsigned arg;
    unsigned long long mask, value;
    int fields = sscanf(line, "%31s %d %127s %u %llu %llu", kind, &err, name, &arg, &mask, &value);
    if (fields <= 0) continue; /* blank line */
    int nr = fields >= 3 ? seccomp_syscall_resolve_name(name) : __NR_SCMP_ERROR;
    if (fields >= 3 && nr == __NR_SCMP_ERROR) {
      fprintf(stderr, "agentfense-seccomp: unknown syscall %s\n", name);
      return 1;
    }
    if (strcmp(kind, "errno") == 0 && fields == 3) {
      rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), nr, 0);
    } else if (strcmp(kind, "errno-masked") == 0 && fields == 6 && arg < 6) {
      rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), nr, 1, SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, mask, value));
    } else {
      fprintf(stderr, "agentfense-seccomp: bad rule line: %s", line);
      return 1;
    }
    /* -EACCES/-EDOM: the syscall does not exist on one of the architectures (e.g. vm86 on x86-64). */
    if (rc != 0 && rc != -EACCES && rc != -EDOM) return fail("rule", name, rc);
    rules++;
  }
  if (rules == 0) {
    fprintf(stderr, "agentfense-seccomp: no rules on stdin\n");
    return 1;
  }
  rc = seccomp_export_bpf(ctx, 1);
  if (rc != 0) return fail("export", "", rc);
  seccomp_release(ctx);
  return 0;
}
