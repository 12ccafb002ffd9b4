// Attacks on a Docker sandbox's secrets (docs/secrets.md; the bwrap case is secrets.test.ts): the real
// value must reach nothing the agent can read — env, /proc, files, output, the audit, the engine's record
// of the container — and the CA bundle it is given must stay as the control plane wrote it (root's,
// 0444, a read-only bind). Its host copy is root-only and goes with the sandbox.
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { describe, expect, inject, it } from 'vitest';
import { containersOf } from '../helpers/docker.js';
import { useCurlImage } from '../helpers/docker-curl-image.js';
import { useNetworkFixture } from '../helpers/network-fixture.js';
import { makeTestCerts } from '../helpers/secret-hosts.js';

const docker = inject('docker');
const VALUE = 'sk-attack-REAL-docker-99aa88bb77cc66dd';
const POLICY = { mode: 'allow', rules: [{ action: 'allow', host: 'pub.test' }] } as const;
const BUNDLE = '/etc/ssl/certs/ca-certificates.crt';
const FIND = "'sk-attack-REAL-docke[r]'";

/** Host paths of the sandboxes' file directories (`<state>/docker/files-<uuid>`) under `dir`. */
async function filesDirs(dir: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (d: string, depth: number): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      const path = join(d, e.name);
      if (!e.isDirectory() || e.isSymbolicLink()) continue;
      if (e.name.startsWith('files-') && d.endsWith('/docker')) found.push(path);
      else if (depth < 6 && e.name !== 'mnt' && e.name !== 'upper') await walk(path, depth + 1);
    }
  };
  await walk(dir, 0);
  return found;
}

describe.skipIf(docker.unavailable !== null)(
  `docker secrets under attack${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    const certs = makeTestCerts();
    const curlImage = useCurlImage(docker.dockerHost);
    const fx = useNetworkFixture({ upstreamCa: certs.ca, dockerPoolSize: 1 });

    it('the value is in no env, /proc entry, file, output, audit or container record', async () => {
      const sb = await fx().sandbox(POLICY, {
        runtime: 'docker',
        image: curlImage(),
        secrets: [{ name: 'API_KEY', hosts: ['pub.test'], value: VALUE }],
      });
      const r = await sb.run(
        [
          'env',
          'cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr "\\0" "\\n"',
          // The pattern's brackets keep grep's own argv (in /proc/*/cmdline) from matching it.
          `echo "found:$(grep -rslE ${FIND} / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null; grep -slE ${FIND} /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null)"`,
          `grep -c "BEGIN CERTIFICATE" ${BUNDLE}`,
        ].join('; '),
        60_000,
      );
      expect(r.out).toContain('found:\n');
      expect(r.out).toMatch(/API_KEY=af-secret-[0-9a-f]{32}/);
      expect(r.out).toMatch(/^[1-9][0-9]*$/m);
      expect(r.out).not.toContain(VALUE);
      expect(r.err).not.toContain(VALUE);
      expect(JSON.stringify(await fx().cp.audit(sb.id, { kind: 'network' }))).not.toContain(VALUE);
      expect(JSON.stringify(await fx().cp.audit(sb.id))).not.toContain(VALUE);
      // The engine's record of the container (its env, mounts, labels): placeholders only.
      const [id] = await containersOf(docker.dockerHost ?? '', sb.id);
      const inspect = await execa('docker', ['inspect', id ?? ''], {
        env: { DOCKER_HOST: docker.dockerHost ?? '' },
      });
      expect(inspect.stdout).toContain('API_KEY=af-secret-');
      expect(inspect.stdout).not.toContain(VALUE);
    });

    it('the CA bundle cannot be changed, replaced or unmounted; its host copy is root-only and goes with the sandbox', async () => {
      const sb = await fx().sandbox(POLICY, {
        runtime: 'docker',
        image: curlImage(),
        secrets: [{ name: 'API_KEY', hosts: ['pub.test'], value: VALUE }],
      });
      const before = await sb.run(`sha256sum ${BUNDLE}`);
      const attempts = [
        `echo evil >> ${BUNDLE}`,
        `echo evil > ${BUNDLE}`,
        `chmod 666 ${BUNDLE}`,
        `rm -f ${BUNDLE}`,
        `mv ${BUNDLE} /tmp/ca`,
        `ln -sf /tmp/ca ${BUNDLE}`,
        `touch /etc/ssl/certs/extra.crt`,
        `umount ${BUNDLE}`,
        `mount -o remount,rw ${BUNDLE}`,
      ];
      const r = await sb.run(
        attempts.map((a) => `if ${a} 2>/dev/null; then echo "done: ${a}"; fi`).join('; '),
      );
      expect(r.out).toBe('');
      const after = await sb.run(
        `sha256sum ${BUNDLE}; stat -c "%u %g %a" ${BUNDLE}; grep " ${BUNDLE} " /proc/mounts`,
      );
      const [sum, owner, mount] = after.out.split('\n');
      expect(sum).toBe(before.out.trim());
      expect(owner).toBe('0 0 444');
      expect(mount?.split(' ')[3]?.split(',')).toContain('ro');
      // On the host: a directory only root enters, the file root's and 0444.
      const dirs = await filesDirs(fx().dirs.dataDir);
      expect(dirs.length).toBeGreaterThan(0);
      for (const dir of dirs) {
        const d = await stat(dir);
        expect([d.uid, d.mode & 0o777]).toEqual([0, 0o700]);
        const f = await stat(join(dir, '0'));
        expect([f.uid, f.mode & 0o777]).toEqual([0, 0o444]);
      }
      for (const { id } of (await fx().cp.listSandboxes()).items) await fx().cp.destroySandbox(id);
      expect(await filesDirs(fx().dirs.dataDir)).toEqual([]);
    });
  },
);
