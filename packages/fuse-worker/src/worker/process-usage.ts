// What this worker process costs, for its stats: memory as the host counts it and CPU of every thread.
import { readFile } from 'node:fs/promises';

/** Proportional set size: the memory this worker really costs (the node binary's pages are shared). */
export async function readPss(): Promise<number | null> {
  try {
    const text = await readFile('/proc/self/smaps_rollup', 'utf8');
    const match = /^Pss:\s+(\d+) kB/m.exec(text);
    return match === null ? null : Number(match[1]) * 1024;
  } catch {
    return null;
  }
}

/** User + system CPU of the whole process (the binding's fetch threads and libuv's pool too), in ms. */
export function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}
