// Shared by the session system tests: a real bwrap sandbox over a tmp directory (sessions need no FUSE
// mount), and sessions in it. Everything a test starts is stopped when the test finishes.
import { randomUUID } from 'node:crypto';
import { chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { createSession } from '@agentfense/control';
import type { CreateSessionOptions, Session } from '@agentfense/control';
import type { RuntimeInstance } from '@agentfense/protocol';
import { createBwrapRuntime } from '@agentfense/runtime-bwrap';

const quiet = { debug: () => undefined, warn: (obj: object, msg: string) => console.warn(msg, obj) };

export interface TestSandbox {
  readonly sb: RuntimeInstance;
  /** The host directory bound at /workspace. */
  readonly workspace: string;
}

/** Starts a bwrap sandbox; stopped and removed when the test finishes. */
export async function startSandbox(): Promise<TestSandbox> {
  const root = await mkdtemp(join(tmpdir(), 'af-session-'));
  const workspace = join(root, 'ws');
  const stateDir = join(root, 'state');
  await mkdir(workspace);
  await mkdir(stateDir);
  const runtime = createBwrapRuntime({ logger: quiet });
  // bwrap runs as the unprivileged sandbox user: it owns the workspace (as the worker reports it).
  if (runtime.traits.hostOwner !== null)
    await chown(workspace, runtime.traits.hostOwner.uid, runtime.traits.hostOwner.gid);
  const sb = await runtime.start({
    sandboxId: `sb_${randomUUID()}`,
    workspaceHostPath: workspace,
    stateDir,
  });
  onTestFinished(async () => {
    await sb.stop();
    await rm(root, { recursive: true, force: true });
  });
  return { sb, workspace };
}

/** Opens a session (in a fresh sandbox unless one is given); closed when the test finishes. */
export async function openSession(
  options: CreateSessionOptions & { sandbox?: RuntimeInstance } = {},
): Promise<Session> {
  const { sandbox, ...rest } = options;
  const sb = sandbox ?? (await startSandbox()).sb;
  const session = await createSession(sb, rest);
  onTestFinished(() => session.close());
  return session;
}

/** A unique marker every process of a session carries in its environment (see hostProcessesWith). */
export function newMarker(label: string): string {
  return `af_ses_${label}_${randomUUID()}`;
}
