// `agentfense mcp <dir>`: one sandbox over <dir> for the life of an MCP server on stdin/stdout. The end
// of stdin, SIGINT or SIGTERM ends it; the sandbox is then destroyed (mount, processes and change set
// gone) unless `keep`, which stops it with its changes, logs and audit trail and prints its id on stderr.
// stdout carries only the protocol: everything else goes to stderr or the control plane's log file.
import type { NetworkPolicyInput } from '@agentfense/network';
import type { SecretSource } from '../secret-sources.js';
import type { Readable, Writable } from 'node:stream';
import type { PermissionRule } from '@agentfense/protocol';
import { ControlPlane } from '../control-plane.js';
import { controlPlaneBackend } from '../http/backend.js';
import { createSandboxMcpServer } from './server.js';
import { LimitedStdioServerTransport } from './stdio-transport.js';

export interface McpStdioOptions {
  readonly dir: string;
  readonly rules: readonly PermissionRule[];
  readonly runtime?: string;
  readonly image?: string;
  readonly network?: boolean | NetworkPolicyInput;
  /** Secrets and their sources (docs/secrets.md); the sandbox sees placeholders. */
  readonly secrets?: readonly SecretSource[];
  readonly allowCommit: boolean;
  readonly keep: boolean;
  readonly dataDir?: string;
  /** Resolves with a signal's name when the process is asked to stop. */
  readonly stopSignal: Promise<string>;
  readonly stderr: { write(text: string): unknown };
  readonly stdin?: Readable;
  readonly stdout?: Writable;
}

/** Serves until stdin ends or a stop signal arrives, then cleans up; resolves with why it ended. */
export async function serveMcpStdio(options: McpStdioOptions): Promise<string> {
  const stdin = options.stdin ?? process.stdin;
  const stdout = options.stdout ?? process.stdout;
  // Listen for the end before the (slow) sandbox start, so a client that gives up early is noticed.
  const ended = new Promise<string>((done) => {
    stdin.once('end', () => done('stdin closed'));
    stdin.once('close', () => done('stdin closed'));
    stdin.once('error', () => done('stdin failed'));
    stdout.once('error', () => done('stdout closed'));
  });
  const stop = Promise.race([ended, options.stopSignal]);
  // One sandbox for the server's life: no idle worker kept spawned ahead for a next one.
  const plane = await ControlPlane.open({
    workerPoolSize: 0,
    ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }),
  });
  let codebaseId: string | undefined;
  let sandboxId: string | undefined;
  let reason = 'stopped';
  try {
    codebaseId = (await plane.linkCodebase({ path: options.dir })).id;
    sandboxId = (
      await plane.createSandbox({
        codebaseId,
        rules: options.rules,
        labels: { 'agentfense.client': 'mcp' },
        ...(options.runtime === undefined ? {} : { runtime: options.runtime }),
        ...(options.image === undefined ? {} : { image: options.image }),
        ...(options.network === undefined ? {} : { network: options.network }),
        ...(options.secrets === undefined || options.secrets.length === 0
          ? {}
          : { secrets: options.secrets }),
      })
    ).id;
    // A stop request during the start wins: nothing is served, everything is cleaned up below.
    const started = await Promise.race([plane.startSandbox(sandboxId).then(() => undefined), stop]);
    if (started !== undefined) {
      reason = started;
      return reason;
    }
    const mcp = createSandboxMcpServer(
      {
        // The user's own directory, linked here: this backend serves that local user, not the API.
        backend: controlPlaneBackend(plane, { localCodebases: true }),
        sandboxId,
        allowCommit: options.allowCommit,
      },
      { logger: plane.logger.child({ component: 'mcp', sandboxId }) },
    );
    // Not the SDK's transport: it closes (and so ends the sandbox) on a message over 10 MiB.
    const transport = new LimitedStdioServerTransport({ stdin, stdout });
    const transportClosed = new Promise<string>(
      (done) => (transport.onclose = () => done('transport closed')),
    );
    await mcp.server.connect(transport);
    options.stderr.write(
      `agentfense: MCP server on stdio, sandbox ${sandboxId} over ${options.dir} (${
        options.allowCommit ? 'commit allowed' : 'no commit'
      }); close stdin or send SIGTERM to stop\n`,
    );
    reason = await Promise.race([stop, transportClosed]);
    await mcp.close();
    return reason;
  } finally {
    try {
      if (sandboxId !== undefined && options.keep) {
        await plane
          .stopSandbox(sandboxId, { reason: `agentfense mcp --keep (${reason})` })
          .catch(() => undefined);
        options.stderr.write(
          `agentfense: kept sandbox ${sandboxId} (stopped; changes, logs and audit kept)\n`,
        );
      } else {
        if (sandboxId !== undefined) await plane.destroySandbox(sandboxId);
        if (codebaseId !== undefined) await plane.deleteCodebase(codebaseId);
      }
    } finally {
      await plane.close();
      // Nothing more is read: let the process exit even though the client still holds the pipe open.
      stdin.destroy();
    }
  }
}
