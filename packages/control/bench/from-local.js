// The library's front door in a loop (part of `pnpm bench:sandbox`): `Sandbox.fromLocal(dir)` with no
// control plane passed in → first exec result, one sandbox at a time, paced PACE_MS apart (untimed), as an
// agent that makes a fresh sandbox per task does. Each round destroys its sandbox before the pause. The
// first round (which opens the data directory and loads the code) is reported on its own; p50 and p90 are
// over the rounds after it. Docker gets an engine the way the docker bench does: DOCKER_HOST or docker's
// default socket if one answers, else Debian's dockerd started privately (state under
// AF_DOCKERD_STATE_DIR) and stopped afterwards.
import console from 'node:console';
import { setTimeout as sleep } from 'node:timers/promises';
import process from 'node:process';
import { Sandbox } from '../dist/index.js';

/** Rounds after the first, and the untimed pause before each. */
export const FROM_LOCAL_ROUNDS = 20;
export const PACE_MS = 1_000;

/**
 * `rounds` + 1 fromLocal → first exec rounds over `repo` on `runtime`; returns the first round's time, the
 * others' (`times`), their two steps (`steps`: fromLocal, first exec) and how many of them got a sandbox
 * created before the call (`ahead`: a spare). `dataDir` is the data directory every call names.
 */
export async function fromLocalRounds({ repo, dataDir, runtime, rounds = FROM_LOCAL_ROUNDS }) {
  const times = [];
  const steps = [];
  let first;
  let ahead = 0;
  for (let i = 0; i <= rounds; i += 1) {
    if (i > 0) await sleep(PACE_MS);
    const called = Date.now();
    const started = performance.now();
    const sb = await Sandbox.fromLocal(repo, { dataDir, runtime });
    const made = performance.now();
    try {
      const result = await sb.run('cat /workspace/README.md', { encoding: 'buffer' });
      const elapsed = performance.now() - started;
      if (result.exitCode !== 0) {
        throw new Error(`first exec exited ${result.exitCode}: ${result.stderr.toString().trim()}`);
      }
      if (i === 0) first = elapsed;
      else {
        times.push(elapsed);
        steps.push({ fromLocal: made - started, firstExec: elapsed - (made - started) });
        if (Date.parse(sb.info().createdAt) < called) ahead += 1;
      }
    } finally {
      await sb.destroy();
    }
  }
  // What the library keeps open between calls (if anything) is closed before the bench removes its files.
  await Sandbox.closeIdle?.();
  return { first, times, steps, ahead };
}

/**
 * A Docker engine for the fromLocal line: `{ dockerHost, stop }`, or `{ unavailable }` with the reason.
 * Sets DOCKER_HOST for the control planes of this process.
 */
export async function dockerEngine() {
  const docker = await import('../../runtime-docker/dist/index.js');
  let started;
  try {
    const probe = await docker.probeEngine();
    const dockerHost = probe.ok
      ? probe.dockerHost
      : (started = await docker.startDockerd({
          stateDir: process.env.AF_DOCKERD_STATE_DIR ?? '/var/lib/agentfense/test-dockerd',
        })).dockerHost;
    await docker.ensureBaseImage({
      dockerHost,
      cacheDir: process.env.AF_IMAGE_CACHE_DIR ?? '/var/cache/agentfense',
      progress: (line) => console.log(`docker: ${line}`),
    });
    process.env.DOCKER_HOST = dockerHost;
    return { dockerHost, stop: () => started?.stop() };
  } catch (err) {
    await started?.stop();
    return { unavailable: err instanceof Error ? err.message : String(err) };
  }
}
