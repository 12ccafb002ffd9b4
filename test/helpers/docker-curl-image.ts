// An image for the docker secrets tests: the base image (Debian minbase: no curl, no ca-certificates, no
// /etc/ssl) plus the host's curl and the libraries it links, so a sandbox can make an HTTPS request with
// the CA bundle it was given. Made once per engine without a registry or a network inside (docker
// create, cp, commit) and kept, like the base image.
import { chmod, copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll } from 'vitest';
import { DEFAULT_IMAGE } from '@agentfense/runtime-docker';

export const CURL_IMAGE = 'agentfense/test-curl:latest';

/** The C library's own files: the image has them from the same Debian release. */
const LIBC = /^(libc|libm|libresolv|libpthread|libdl|ld-linux-x86-64)\.so/;

export async function ensureCurlImage(dockerHost: string): Promise<string> {
  const docker = (args: string[]) => execa('docker', args, { env: { DOCKER_HOST: dockerHost } });
  const has = await execa('docker', ['image', 'inspect', CURL_IMAGE], {
    env: { DOCKER_HOST: dockerHost },
    reject: false,
  });
  if (has.exitCode === 0) return CURL_IMAGE;
  const stage = await mkdtemp(join(tmpdir(), 'af-curl-image-'));
  const name = `af-curl-image-${String(process.pid)}`;
  try {
    await mkdir(join(stage, 'usr/bin'), { recursive: true });
    await mkdir(join(stage, 'usr/lib/x86_64-linux-gnu'), { recursive: true });
    await copyFile('/usr/bin/curl', join(stage, 'usr/bin/curl'));
    await chmod(join(stage, 'usr/bin/curl'), 0o755);
    const ldd = await execa('ldd', ['/usr/bin/curl']);
    for (const line of ldd.stdout.split('\n')) {
      const path = / => (\/\S+)/.exec(line)?.[1];
      if (path === undefined || LIBC.test(basename(path))) continue;
      // copyFile follows the soname's symlink: the file lands under the name the loader looks for.
      await copyFile(path, join(stage, 'usr/lib/x86_64-linux-gnu', basename(path)));
    }
    await docker(['create', '--name', name, DEFAULT_IMAGE, 'true']);
    await docker(['cp', `${stage}/.`, `${name}:/`]);
    await docker(['commit', name, CURL_IMAGE]);
  } finally {
    await execa('docker', ['rm', '--force', name], { env: { DOCKER_HOST: dockerHost }, reject: false });
    await rm(stage, { recursive: true, force: true });
  }
  return CURL_IMAGE;
}

/**
 * Registers the hooks a docker test file with curl needs: DOCKER_HOST pointed at the test engine (and put
 * back after), the curl image made once. Returns the image's name, known once the hooks ran.
 */
export function useCurlImage(dockerHost: string | null | undefined): () => string {
  const saved = process.env['DOCKER_HOST'];
  let image = '';
  beforeAll(async () => {
    process.env['DOCKER_HOST'] = dockerHost ?? '';
    image = await ensureCurlImage(dockerHost ?? '');
  }, 120_000);
  afterAll(() => {
    if (saved === undefined) delete process.env['DOCKER_HOST'];
    else process.env['DOCKER_HOST'] = saved;
  });
  return () => image;
}
