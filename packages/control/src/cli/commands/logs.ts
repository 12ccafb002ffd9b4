// `agentfense logs <sandbox> [-f]` and `agentfense audit <sandbox>`: what a sandbox's worker logged, and
// the access decisions it recorded (SPEC §6). Both read files under the data directory, so they work for
// sandboxes run by another process (`serve`, a `run --keep`), running or stopped.
import { open, stat } from 'node:fs/promises';
import type { Command } from 'commander';
import { InvalidArgumentError } from '@agentfense/protocol';
import type { AuditEvent } from '@agentfense/protocol';
import { addDataOption, withControlPlane } from '../control-options.js';
import type { DataFlags } from '../control-options.js';
import { formatTable, printJson } from '../io.js';
import type { CliContext, CliIo } from '../io.js';
import { untilSignal } from '../signals.js';

const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};
const FOLLOW_POLL_MS = 200;

/** One pino JSON line as `time LEVEL msg key=value…`; other lines unchanged. */
export function formatLogLine(line: string): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  const { time, level, msg, pid: _pid, sandbox: _sandbox, hostname: _host, ...rest } = record;
  const when = typeof time === 'number' ? new Date(time).toISOString() : '-';
  const fields = Object.entries(rest)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  return `${when} ${(LEVELS[Number(level)] ?? String(level)).padEnd(5)} ${typeof msg === 'string' ? msg : JSON.stringify(msg ?? '')}${fields === '' ? '' : ` ${fields}`}`;
}

/** Prints the file from `offset`; returns the new offset (only whole lines are printed). */
async function printFrom(io: CliIo, file: string, offset: number, json: boolean): Promise<number> {
  const handle = await open(file, 'r').catch(() => null);
  if (handle === null) return offset;
  try {
    const { size } = await handle.stat();
    if (size < offset) offset = 0; // truncated or replaced: start over
    if (size === offset) return offset;
    const buffer = Buffer.alloc(size - offset);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, offset);
    const text = buffer.subarray(0, bytesRead).toString('utf8');
    const end = text.lastIndexOf('\n') + 1;
    for (const line of text.slice(0, end).split('\n')) {
      if (line !== '') io.stdout.write(`${json ? line : formatLogLine(line)}\n`);
    }
    return offset + Buffer.byteLength(text.slice(0, end));
  } finally {
    await handle.close();
  }
}

function formatAudit(events: readonly AuditEvent[]): string {
  return formatTable(
    events.map((e) => [
      new Date(e.time).toISOString(),
      e.decision.toUpperCase(),
      e.op,
      e.target === undefined ? e.path : `${e.path} -> ${e.target}`,
      e.errno ?? '',
      `permission=${e.permission}`,
    ]),
  );
}

/** Registers `logs` and `audit` on the program. */
export function registerLogs(program: Command, { io }: CliContext): void {
  addDataOption(
    program
      .command('logs')
      .description("print a sandbox's worker log (JSON lines from pino, shown as text)")
      .argument('<sandbox>', 'sandbox id (sb_…)'),
  )
    .option('-f, --follow', 'keep printing new lines until Ctrl-C')
    .option('--json', 'print the raw JSON lines')
    .action(async (id: string, flags: DataFlags & { follow?: boolean; json?: boolean }) => {
      const file = await withControlPlane(flags, (plane) => {
        plane.getSandbox(id); // NotFoundError naming the id
        return plane.layout.sandbox(id).workerLog;
      });
      const json = flags.json === true;
      let offset = await printFrom(io, file, 0, json);
      if (flags.follow !== true) {
        if ((await stat(file).catch(() => null)) === null)
          io.stderr.write(`agentfense: ${id} has no log yet\n`);
        return;
      }
      const signal = untilSignal();
      try {
        for (;;) {
          const ended = await Promise.race([
            signal.promise,
            new Promise<null>((done) => setTimeout(() => done(null), FOLLOW_POLL_MS)),
          ]);
          if (ended !== null) return;
          offset = await printFrom(io, file, offset, json);
        }
      } finally {
        signal.dispose();
      }
    });

  addDataOption(
    program
      .command('audit')
      .description("print a sandbox's access decisions: denials always, allowed accesses when enabled")
      .argument('<sandbox>', 'sandbox id (sb_…)'),
  )
    .option('--denied', 'only denials')
    .option('--allowed', 'only allowed accesses')
    .option('--limit <n>', 'the most recent n events', '1000')
    .option('--json', 'print a JSON array of events')
    .action(
      async (
        id: string,
        flags: DataFlags & { denied?: boolean; allowed?: boolean; limit: string; json?: boolean },
      ) => {
        if (flags.denied === true && flags.allowed === true) {
          throw new InvalidArgumentError('give either --denied or --allowed, not both');
        }
        const limit = Number(flags.limit);
        if (!Number.isInteger(limit) || limit <= 0) {
          throw new InvalidArgumentError(
            `--limit ${JSON.stringify(flags.limit)}: expected a positive integer`,
          );
        }
        const decision = flags.denied === true ? 'deny' : flags.allowed === true ? 'allow' : undefined;
        await withControlPlane(flags, async (plane) => {
          const events = await plane.audit(id, { limit, ...(decision === undefined ? {} : { decision }) });
          if (flags.json === true) printJson(io, events);
          else if (events.length === 0) io.stderr.write(`agentfense: no audit events for ${id}\n`);
          else io.stdout.write(`${formatAudit(events)}\n`);
        });
      },
    );
}
