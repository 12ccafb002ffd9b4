// A session: one long-lived shell in the sandbox, started by af-init with a stdin pipe. The API tier writes
// to its stdin and reads its output by offset (what it has not seen yet), so a reader that reconnects loses
// nothing still buffered. Output beyond the buffer's bound drops the oldest bytes (the offset says so).
import { randomUUID } from 'node:crypto';
import type { LauncherClient, LauncherCommand } from '@agentfense/launcher';
import { InvalidArgumentError, NotFoundError } from '@agentfense/protocol';
import type { ContainerCgroup } from '@agentfense/runtime-docker';

/** Output kept per session for readers (oldest dropped first). */
const SESSION_BUFFER_BYTES = 1 << 20;
/** At most this many sessions per sandbox. */
const MAX_SESSIONS = 16;
/** How long a read waits for output before answering with nothing. */
const MAX_WAIT_MS = 30_000;

/** What a read returns: output from `offset` on, the offset to ask next, and whether the shell ended. */
export interface SessionOutput {
  readonly offset: number;
  readonly data: Buffer;
  readonly next: number;
  readonly exitCode: number | null;
  readonly ended: boolean;
}

class Session {
  readonly id = `ses_${randomUUID()}`;
  #chunks: Buffer[] = [];
  /** Offset of the first byte still in #chunks. */
  #start = 0;
  #end = 0;
  #ended = false;
  #exitCode: number | null = null;
  #waiters = new Set<() => void>();

  constructor(readonly command: LauncherCommand) {
    const take = (chunk: Buffer): void => this.#append(chunk);
    command.stdout.on('data', take);
    command.stderr.on('data', take);
    command.done.then(
      (o) => this.#finish(o.kind === 'exited' ? o.code : o.kind === 'signaled' ? 128 + o.signal : 127),
      () => this.#finish(null),
    );
  }

  #append(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#end += chunk.length;
    while (this.#end - this.#start > SESSION_BUFFER_BYTES && this.#chunks.length > 1) {
      this.#start += this.#chunks.shift()!.length;
    }
    this.#wake();
  }

  #finish(code: number | null): void {
    this.#ended = true;
    this.#exitCode = code;
    this.#wake();
  }

  #wake(): void {
    for (const w of this.#waiters) w();
    this.#waiters.clear();
  }

  async read(offset: number, waitMs: number): Promise<SessionOutput> {
    if (offset >= this.#end && !this.#ended && waitMs > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(waitMs, MAX_WAIT_MS));
        this.#waiters.add(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    const from = Math.max(offset, this.#start);
    const all = Buffer.concat(this.#chunks);
    const data = all.subarray(from - this.#start);
    return { offset: from, data, next: this.#end, exitCode: this.#exitCode, ended: this.#ended };
  }
}

/** The sessions of one sandbox. */
export class Sessions {
  readonly #sessions = new Map<string, Session>();

  constructor(
    private readonly client: LauncherClient,
    private readonly cgroup: ContainerCgroup,
    private readonly env: Readonly<Record<string, string>>,
  ) {}

  get count(): number {
    return this.#sessions.size;
  }

  open(options: { readonly cwd?: string; readonly env?: Readonly<Record<string, string>> }): string {
    if (this.#sessions.size >= MAX_SESSIONS) {
      throw new InvalidArgumentError(`at most ${MAX_SESSIONS} sessions per sandbox`);
    }
    const command = this.client.spawn({
      argv: ['/bin/sh'],
      cwd: options.cwd ?? '/workspace',
      env: { ...this.env, ...options.env },
      stdin: true,
    });
    const session = new Session(command);
    this.#sessions.set(session.id, session);
    return session.id;
  }

  #get(id: string): Session {
    const session = this.#sessions.get(id);
    if (session === undefined) throw new NotFoundError(`no session ${id}`);
    return session;
  }

  write(id: string, data: Buffer): void {
    this.#get(id).command.stdin?.write(data);
  }

  read(id: string, offset: number, waitMs: number): Promise<SessionOutput> {
    return this.#get(id).read(offset, waitMs);
  }

  /** Ends the shell and everything it started (its whole session, through the container's cgroup). */
  async close(id: string): Promise<void> {
    const session = this.#get(id);
    this.#sessions.delete(id);
    const pid = await session.command.pid.catch(() => null);
    if (pid !== null) await this.cgroup.killSession(pid);
    session.command.signal('SIGKILL');
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.#sessions.keys()].map((id) => this.close(id).catch(() => undefined)));
  }
}
