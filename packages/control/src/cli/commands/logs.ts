// `agentfense logs <sandbox> [-f]` and `agentfense audit <sandbox>`: what a sandbox's worker logged, and
// the access decisions it recorded (contract §6). Both read files under the data directory, so they work for
// sandboxes run by another process (`serve`, a `run --keep`), running or stopped.
import { stat } from 'node:fs/promises';
import type { Command } from 'commander';
import { InvalidArgumentError, escapeJsonText, escapeLine, quotePath } from '@agentfense/protocol/core';
import type { AuditEvent } from '@agentfense/protocol';
import type { AuditQuery } from '@agentfense/audit-trail';
import { followLog, readNewLines } from '../../sandboxes/log-file.js';
import { addDataOption, withControlPlane } from '../control-options.js';
import type { DataFlags } from '../control-options.js';
import { formatNetworkAudit } from '../network-format.js';
import { formatTable, printJson } from '../io.js';
import type { CliContext } from '../io.js';
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
    return escapeLine(line);
  }
  const { time, level, msg, pid: _pid, sandbox: _sandbox, hostname: _host, ...rest } = record;
  const when = typeof time === 'number' ? new Date(time).toISOString() : '-';
  const fields = Object.entries(rest)
    .map(
      ([k, v]) =>
        `${escapeLine(k)}=${typeof v === 'string' ? quotePath(v) : escapeJsonText(JSON.stringify(v))}`,
    )
    .join(' ');
  return `${when} ${(LEVELS[Number(level)] ?? String(level)).padEnd(5)} ${typeof msg === 'string' ? escapeLine(msg) : escapeJsonText(JSON.stringify(msg ?? ''))}${fields === '' ? '' : ` ${fields}`}`;
}

function formatAudit(events: readonly AuditEvent[]): string {
  return formatTable(
    events.map((e) => [
      new Date(e.time).toISOString(),
      e.decision.toUpperCase(),
      e.op,
      e.target === undefined ? quotePath(e.path) : `${quotePath(e.path)} -> ${quotePath(e.target)}`,
      e.errno ?? '',
      `permission=${e.permission}`,
      // A flood collapsed by the trail (@agentfense/audit-trail): this record stands for all of them.
      ...(e.similar === undefined ? [] : [`(${e.similar} similar denials, the first shown)`]),
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
      const file = await withControlPlane(flags, async (plane) => {
        await plane.getSandbox(id); // NotFoundError naming the id
        return plane.layout.sandbox(id).workerLog;
      });
      const json = flags.json === true;
      const print = (lines: readonly string[]): void => {
        for (const line of lines)
          if (line !== '') io.stdout.write(`${json ? escapeJsonText(line) : formatLogLine(line)}\n`);
      };
      // Everything there now (in pieces of at most MAX_LOG_READ_BYTES), then, with -f, what follows.
      let offset = 0;
      for (;;) {
        const chunk = await readNewLines(file, offset);
        print(chunk.lines);
        if (chunk.offset === offset) break;
        offset = chunk.offset;
      }
      if (flags.follow !== true) {
        if ((await stat(file).catch(() => null)) === null)
          io.stderr.write(`agentfense: ${id} has no log yet\n`);
        return;
      }
      const signal = untilSignal();
      const stop = new AbortController();
      void signal.promise.then(() => stop.abort());
      try {
        await followLog(file, { offset, signal: stop.signal, onLines: print, pollMs: FOLLOW_POLL_MS });
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
    .option(
      '--network',
      "the network's records instead: connections (name, address, rule, bytes) and refused DNS",
    )
    .option('--json', 'print a JSON array of events')
    .action(
      async (
        id: string,
        flags: DataFlags & {
          denied?: boolean;
          allowed?: boolean;
          limit: string;
          json?: boolean;
          network?: boolean;
        },
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
          const query: AuditQuery = { limit, ...(decision === undefined ? {} : { decision }) };
          if (flags.network === true) {
            const records = await plane.audit(id, { ...query, kind: 'network' });
            if (flags.json === true) printJson(io, records);
            else if (records.length === 0) io.stderr.write(`agentfense: no network records for ${id}\n`);
            else io.stdout.write(`${formatNetworkAudit(records)}\n`);
            return;
          }
          const events = await plane.audit(id, query);
          if (flags.json === true) printJson(io, events);
          else if (events.length === 0) io.stderr.write(`agentfense: no audit events for ${id}\n`);
          else io.stdout.write(`${formatAudit(events)}\n`);
        });
      },
    );
}
