// Secrets on the Docker runtime, as a user relies on them (docs/secrets.md; the bwrap case is
// secrets.test.ts): the container gets the placeholder and the CA bundle, bound read-only at the system
// bundle's path even though its image has no /etc/ssl at all; curl trusts the bundle, and the request to
// the bound host reaches the server with the real value, through the proxy variables and without them,
// from the library and from the CLI.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { useCurlImage } from '../helpers/docker-curl-image.js';
import { useNetworkFixture } from '../helpers/network-fixture.js';
import { makeTestCerts, serveHttps } from '../helpers/secret-hosts.js';
import type { Seen } from '../helpers/secret-hosts.js';

const docker = inject('docker');
const VALUE = 'sk-test-REAL-docker-5e4d3c2b1a0f9e8d7c6b';
const POLICY = { mode: 'allow', rules: [{ action: 'allow', host: 'pub.test' }] } as const;
const BUNDLE = '/etc/ssl/certs/ca-certificates.crt';
const BIN = fileURLToPath(new URL('../../packages/control/bin/agentfense.js', import.meta.url));

describe.skipIf(docker.unavailable !== null)(
  `secrets, docker runtime${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    const certs = makeTestCerts();
    const curlImage = useCurlImage(docker.dockerHost);
    // With a pool: a sandbox with secrets must still get its bundle (a fresh container, not a pooled one).
    const fx = useNetworkFixture({ upstreamCa: certs.ca, dockerPoolSize: 1 });
    let server: Server;
    let seen: Seen[];
    beforeAll(() => {
      ({ server, seen } = serveHttps(fx().net.nsPath, 8443, certs.leaf));
    });
    afterAll(() => server.close());

    it('gives the placeholder and a trusted CA bundle; the bound host receives the real value', async () => {
      const sb = await fx().sandbox(POLICY, {
        runtime: 'docker',
        image: curlImage(),
        secrets: [{ name: 'API_KEY', hosts: ['pub.test'], value: VALUE }],
      });
      const env = await sb.run('printf "%s" "$API_KEY"');
      const placeholder = env.out;
      expect(placeholder).toMatch(/^af-secret-[0-9a-f]{32}$/);
      const r = await sb.run(
        [
          // The image has no /etc/ssl: the directory holds only the bound bundle.
          'ls -A /etc/ssl/certs',
          `stat -c "%u %a" ${BUNDLE}`,
          'echo "$SSL_CERT_FILE $CURL_CA_BUNDLE $REQUESTS_CA_BUNDLE $GIT_SSL_CAINFO $NODE_EXTRA_CA_CERTS"',
          // Through the proxy variables, and transparently: curl verifies against $CURL_CA_BUNDLE.
          'curl -sS -m 10 -H "Authorization: Bearer $API_KEY" "https://pub.test:8443/docker?key=$API_KEY"',
          `curl -sS -m 10 --noproxy '*' -H "Authorization: Bearer $API_KEY" https://pub.test:8443/docker-nat`,
        ].join('; '),
      );
      expect(r.err).toBe('');
      expect(r.out).toBe(
        [
          'ca-certificates.crt',
          '0 444',
          Array(5).fill(BUNDLE).join(' '),
          `echo Bearer ${placeholder}`,
          `echo Bearer ${placeholder}`,
          '',
        ].join('\n'),
      );
      expect(seen.find((s) => s.url === `/docker?key=${VALUE}`)?.authorization).toBe(`Bearer ${VALUE}`);
      expect(seen.find((s) => s.url === '/docker-nat')?.authorization).toBe(`Bearer ${VALUE}`);
      const records = await fx().cp.audit(sb.id, { kind: 'network' });
      expect(records.filter((e) => e.op === 'secret')).toHaveLength(2);
      expect(JSON.stringify(records)).not.toContain(VALUE);
    });

    it('the CLI: run --runtime docker --secret NAME@host:env:VAR', async () => {
      const data = await mkdtemp(join(tmpdir(), 'af-docker-secret-cli-'));
      try {
        const caFile = join(data, 'upstream-ca.pem');
        await writeFile(caFile, certs.ca);
        const ran = await execa(
          'node',
          [
            ...[BIN, 'run', fx().dirs.repo, '--data', data, '--runtime', 'docker', '--image', curlImage()],
            ...['--allow-host', 'pub.test', '--secret', 'API_KEY@pub.test:env:AF_TEST_OPERATOR_KEY', '--'],
            'sh',
            '-c',
            'curl -sS -m 10 -H "Authorization: Bearer $API_KEY" https://pub.test:8443/docker-cli',
          ],
          {
            env: {
              ...process.env,
              AGENTFENSE_NETWORK_HOSTS: fx().net.hostsFile,
              AGENTFENSE_NETWORK_UPSTREAM_CA: caFile,
              AGENTFENSE_RUN_HELPER: '0',
              AF_TEST_OPERATOR_KEY: VALUE,
            },
            reject: false,
          },
        );
        expect(ran.stderr).toBe('');
        expect(ran.stdout).toMatch(/^echo Bearer af-secret-[0-9a-f]{32}$/);
        expect(seen.find((s) => s.url === '/docker-cli')?.authorization).toBe(`Bearer ${VALUE}`);
      } finally {
        await rm(data, { recursive: true, force: true });
      }
    });
  },
);
