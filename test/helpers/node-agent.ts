// The node agent as the tests run it: `agentfense node` as a real process, its HTTP API, and sandbox
// containers made the way the Swarm adapter's service spec makes them (labels, hostname, no capabilities,
// limits, the command that waits for af-init's socket), on the test engine.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { SANDBOX_WAIT_COMMAND } from '@agentfense/node-agent';
import { MANAGED_BY, MANAGED_BY_LABEL, SANDBOX_ID_LABEL } from '@agentfense/orchestrator/swarm';
import { DEFAULT_IMAGE } from '@agentfense/runtime-docker';

// Not http-fixture's `bin`: that module needs vitest, and the cluster bench uses these helpers too.
const bin = fileURLToPath(new URL('../../packages/control/bin/agentfense.js', import.meta.url));

export const randomToken = (): string => randomBytes(24).toString('hex');

/** A running `agentfense node`. */
export interface AgentProcess {
  readonly url: string;
  readonly child: ChildProcess;
  /** What it wrote to stderr so far. */
  stderr(): string;
  /** SIGTERM and wait (SIGKILL: a crash, nothing cleaned up). */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export async function startAgent(options: {
  readonly stateDir: string;
  readonly codebaseRoot: string;
  readonly token: string;
  readonly tokenFile: string;
  readonly dockerHost: string;
  /** Where it listens; default any free port on 127.0.0.1. */
  readonly listen?: string;
  /** The network namespace (`ip netns` name) it runs in, as a node's agent runs in its node's network. */
  readonly netns?: string;
  /** The node name it reports (default: the host name). */
  readonly nodeName?: string;
  /** More flags for `agentfense node` (e.g. `--blobs DIR`). */
  readonly extraArgs?: readonly string[];
}): Promise<AgentProcess> {
  await writeFile(options.tokenFile, `${options.token}\n`, { mode: 0o600 });
  const argv = [
    bin,
    'node',
    '--listen',
    options.listen ?? '127.0.0.1:0',
    '--token-file',
    options.tokenFile,
    '--state',
    options.stateDir,
    '--codebases',
    options.codebaseRoot,
    ...(options.dockerHost === '' ? [] : ['--docker-host', options.dockerHost]),
    ...(options.nodeName === undefined ? [] : ['--node-name', options.nodeName]),
    ...(options.extraArgs ?? []),
  ];
  // nsenter execs the agent in place: the child's pid is the agent's, and its workers share the netns.
  const child =
    options.netns === undefined
      ? spawn(process.execPath, argv, { stdio: ['ignore', 'ignore', 'pipe'] })
      : spawn('nsenter', [`--net=/run/netns/${options.netns}`, '--', process.execPath, ...argv], {
          stdio: ['ignore', 'ignore', 'pipe'],
        });
  let stderr = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const m = /node agent on ([\d.]+):(\d+)/.exec(stderr);
      if (m !== null) resolve(`http://${m[1]}:${m[2]}`);
    });
    child.once('exit', (code) => reject(new Error(`agentfense node exited (${String(code)}): ${stderr}`)));
  });
  return {
    url,
    child,
    stderr: () => stderr,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** One call to the agent's API; `token: null` sends none. */
export async function call(
  agent: { readonly url: string },
  token: string | null,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown>; text: string }> {
  const res = await fetch(`${agent.url}${path}`, {
    method,
    headers: {
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // NDJSON (exec) or empty: the caller reads `text`.
  }
  return { status: res.status, json, text };
}

/** An exec's NDJSON answer, decoded. */
export interface ExecAnswer {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number | null;
}

export async function exec(
  agent: { readonly url: string },
  token: string,
  sandboxId: string,
  argv: readonly string[],
): Promise<ExecAnswer> {
  const { status, text } = await call(agent, token, 'POST', `/v1/sandboxes/${sandboxId}/exec`, { argv });
  if (status !== 200) throw new Error(`exec answered ${status}: ${text}`);
  let stdout = '';
  let stderr = '';
  let exitCode: number | null | undefined;
  for (const line of text.split('\n').filter(Boolean)) {
    const l = JSON.parse(line) as { stdout?: string; stderr?: string; exit?: { exitCode: number | null } };
    if (l.stdout !== undefined) stdout += Buffer.from(l.stdout, 'base64').toString();
    if (l.stderr !== undefined) stderr += Buffer.from(l.stderr, 'base64').toString();
    if (l.exit !== undefined) exitCode = l.exit.exitCode;
  }
  if (exitCode === undefined) throw new Error(`exec gave no exit line: ${text}`);
  return { stdout, stderr, exitCode };
}

/** A session command's NDJSON answer (blank keep-alive lines, then one result line), decoded. */
export async function sessionRun(
  agent: { readonly url: string },
  token: string,
  sandboxId: string,
  sessionId: string,
  command: string,
): Promise<ExecAnswer> {
  const path = `/v1/sandboxes/${sandboxId}/sessions/${sessionId}/exec`;
  const { status, text } = await call(agent, token, 'POST', path, { command });
  if (status !== 200) throw new Error(`session exec answered ${status}: ${text}`);
  const last = text.split('\n').filter(Boolean).at(-1) ?? '{}';
  const { result } = JSON.parse(last) as {
    result?: { stdout: string; stderr: string; exitCode: number | null };
  };
  if (result === undefined) throw new Error(`session exec gave no result: ${text}`);
  const decode = (b64: string): string => Buffer.from(b64, 'base64').toString();
  return { stdout: decode(result.stdout), stderr: decode(result.stderr), exitCode: result.exitCode };
}

/**
 * A sandbox container as the Swarm adapter's spec makes one (deploy/swarm/sandbox-service.json): the
 * adapter's labels, hostname `sandbox`, every capability dropped, memory and process limits, the base image,
 * and SANDBOX_WAIT_COMMAND; no network (the engines run with --bridge=none). Returns its id.
 */
export async function createSandboxContainer(
  dockerHost: string,
  sandboxId: string,
  /**
   * Run before the wait as root without capabilities, owner of the image's files (what a hostile image
   * could have shipped, or its entrypoint do): the image's own user cannot change `/`.
   */
  prelude?: string,
): Promise<string> {
  const env = dockerHost === '' ? {} : { DOCKER_HOST: dockerHost };
  const r = await execa(
    'docker',
    [
      'run',
      '--detach',
      '--pull',
      'never',
      '--label',
      `${MANAGED_BY_LABEL}=${MANAGED_BY}`,
      '--label',
      `${SANDBOX_ID_LABEL}=${sandboxId}`,
      '--hostname',
      'sandbox',
      '--cap-drop',
      'ALL',
      '--network',
      'none',
      '--memory',
      '512m',
      '--pids-limit',
      '1024',
      // Swarm's restart policy `any`: a container whose af-init ended is started again on this node.
      '--restart',
      'always',
      ...(prelude === undefined ? [] : ['--user', '0:0']),
      DEFAULT_IMAGE,
      ...(prelude === undefined
        ? SANDBOX_WAIT_COMMAND
        : ['/bin/sh', '-c', `${prelude}; exec "$@"`, 'prelude', ...SANDBOX_WAIT_COMMAND]),
    ],
    { env },
  );
  return r.stdout.trim();
}

export async function removeContainer(dockerHost: string, id: string): Promise<void> {
  const env = dockerHost === '' ? {} : { DOCKER_HOST: dockerHost };
  await execa('docker', ['rm', '--force', id], { env, reject: false });
}
