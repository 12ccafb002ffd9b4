// `--pids N --memory SIZE --cpus N --disk SIZE --tmp SIZE`: a sandbox's resource limits on the command
// line (sizes like 512M or 4G, binary units). What is not given keeps the control plane's defaults
// (DEFAULT_RESOURCES: pids 1024, memory 4G, all CPUs but one, disk 10G, /tmp 1G).
import type { Command } from 'commander';
import { InvalidArgumentError, parseByteSize, parseCpus } from '@agentfense/protocol/core';
import type { ResourceLimits } from '@agentfense/protocol';

export interface ResourceFlags {
  readonly pids?: string;
  readonly memory?: string;
  readonly cpus?: string;
  readonly disk?: string;
  readonly tmp?: string;
}

/** Adds the resource options to a command. */
export function addResourceOptions(command: Command): Command {
  return command
    .option('--pids <n>', 'most processes/threads at once (default 1024)')
    .option('--memory <size>', 'memory limit, e.g. 512M or 4G (default 4G; /tmp counts against it)')
    .option('--cpus <n>', 'CPU cores, e.g. 1 or 1.5 (default: all host CPUs but one)')
    .option('--disk <size>', 'most the sandbox may write under /workspace, e.g. 2G (default 10G)')
    .option('--tmp <size>', 'size of the private /tmp, e.g. 256M (default 1G)');
}

/** The limits given on the command line (only those). */
export function resourcesFromFlags(flags: ResourceFlags): ResourceLimits {
  const out: { -readonly [K in keyof ResourceLimits]: number } = {};
  if (flags.pids !== undefined) {
    const pids = /^\d+$/.test(flags.pids) ? Number(flags.pids) : NaN;
    if (!Number.isSafeInteger(pids) || pids < 1) {
      throw new InvalidArgumentError(
        `--pids must be a positive whole number, got ${JSON.stringify(flags.pids)}`,
      );
    }
    out.pidsLimit = pids;
  }
  if (flags.memory !== undefined) out.memoryBytes = parseByteSize(flags.memory, '--memory');
  if (flags.cpus !== undefined) out.cpuQuota = parseCpus(flags.cpus);
  if (flags.disk !== undefined) out.diskBytes = parseByteSize(flags.disk, '--disk');
  if (flags.tmp !== undefined) out.tmpBytes = parseByteSize(flags.tmp, '--tmp');
  return out;
}
