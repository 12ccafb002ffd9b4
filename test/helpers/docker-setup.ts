// Global setup of the docker tests: an engine and the base image, or a visible reason why not.
//
// - Uses the engine at DOCKER_HOST (or docker's default socket) when one answers; otherwise starts Debian's
//   dockerd privately (packages/runtime-docker/src/setup/dockerd.ts: own socket, data and exec roots under
//   AF_DOCKERD_STATE_DIR, default /var/lib/agentfense/test-dockerd; no bridge, no iptables, no ip_forward)
//   and stops it afterwards.
// - Makes sure `agentfense/base:latest` exists: imported from the cached root filesystem tarball under
//   AF_IMAGE_CACHE_DIR (default /var/cache/agentfense), built with debootstrap the first time (~1 min).
// - Skips all of it when the docker test file is not part of this run (other system tests do not pay for
//   an engine), and when AF_DOCKER_TESTS=0.
// - When an engine cannot be had, the docker tests are skipped with the reason (inject('docker')), unless
//   AF_REQUIRE_DOCKER=1 (CI on the project's machines), where that is a failure.
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { ensureBaseImage, probeEngine, startDockerd, type StartedDockerd } from '@agentfense/runtime-docker';
import type { DockerTestContext } from './docker.js';

const DOCKER_TEST_FILE = fileURLToPath(new URL('../runtime/docker.test.ts', import.meta.url));

/** Is the docker test file selected by the CLI filters of this run? (No filter: every file runs.) */
function dockerTestsSelected(project: TestProject): boolean {
  // `filenamePattern` holds the CLI's file filters (substring matches). It is internal to vitest: if it
  // ever disappears, this says "selected" and the engine is simply always prepared.
  const patterns = (project.vitest as unknown as { filenamePattern?: string[] }).filenamePattern;
  if (patterns === undefined || patterns.length === 0) return true;
  return patterns.some((p) => DOCKER_TEST_FILE.includes(p) || p.includes('docker'));
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const provide = (context: DockerTestContext): void => project.provide('docker', context);
  if (process.env['AF_DOCKER_TESTS'] === '0') {
    provide({ dockerHost: null, unavailable: 'AF_DOCKER_TESTS=0' });
    return () => Promise.resolve();
  }
  if (!dockerTestsSelected(project)) {
    provide({ dockerHost: null, unavailable: 'docker tests not selected in this run' });
    return () => Promise.resolve();
  }
  let started: StartedDockerd | undefined;
  try {
    const t0 = performance.now();
    let dockerHost: string;
    const probe = await probeEngine();
    if (probe.ok) {
      dockerHost = probe.dockerHost;
      console.log(`docker tests: using the engine at ${dockerHost} (${probe.version})`);
    } else {
      started = await startDockerd({
        stateDir: process.env['AF_DOCKERD_STATE_DIR'] ?? '/var/lib/agentfense/test-dockerd',
      });
      dockerHost = started.dockerHost;
      console.log(
        `docker tests: started dockerd (pid ${started.pid}) at ${dockerHost} in ${Math.round(performance.now() - t0)} ms`,
      );
    }
    const image = await ensureBaseImage({
      dockerHost,
      cacheDir: process.env['AF_IMAGE_CACHE_DIR'] ?? '/var/cache/agentfense',
      progress: (line) => console.log(`docker tests: ${line}`),
    });
    console.log(`docker tests: base image ${image.image} ${image.action} (${image.seconds} s)`);
    provide({ dockerHost, unavailable: null });
  } catch (err) {
    await started?.stop();
    started = undefined;
    if (process.env['AF_REQUIRE_DOCKER'] === '1') throw err;
    const reason = `no usable Docker engine: ${(err as Error).message}`;
    console.warn(`docker tests will be skipped: ${reason}`);
    provide({ dockerHost: null, unavailable: reason });
  }
  return async () => {
    if (started !== undefined) {
      await started.stop();
      console.log('docker tests: stopped the dockerd they started');
    }
  };
}
