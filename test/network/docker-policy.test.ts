// The same network policy on the Docker runtime: the container's own namespace (`--network none`) is
// published to the host and policed by the sandbox's policy point exactly as a bwrap sandbox's.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { useNetworkFixture } from '../helpers/network-fixture.js';
import { TEST_ADDRESSES } from '../helpers/test-net.js';

const docker = inject('docker');

describe.skipIf(docker.unavailable !== null)(
  `network policy, docker runtime${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    const saved = process.env['DOCKER_HOST'];
    beforeAll(() => {
      process.env['DOCKER_HOST'] = docker.dockerHost ?? '';
    });
    afterAll(() => {
      if (saved === undefined) delete process.env['DOCKER_HOST'];
      else process.env['DOCKER_HOST'] = saved;
    });
    const fx = useNetworkFixture({ dockerPoolSize: 1 });

    it('allows what the rules allow, refuses the rest and never reaches the host', async () => {
      let hits = 0;
      const server = createServer((_req, res) => {
        hits += 1;
        res.end('host');
      });
      await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
      onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
      const { port } = server.address() as AddressInfo;
      const sb = await fx().sandbox(
        { mode: 'allow', rules: [{ action: 'allow', host: 'pub.test' }] },
        { runtime: 'docker' },
      );
      const r = await sb.run(
        [
          'cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d " "',
          'getent hosts pub.test >/dev/null && echo resolves',
          `bash -c 'exec 3<>/dev/tcp/pub.test/80; printf "GET / HTTP/1.0\\r\\nHost: pub.test\\r\\n\\r\\n" >&3; tail -n 1 <&3'`,
          // A redirected connection is accepted, then refused once its request says where it goes.
          `bash -c 'exec 3<>/dev/tcp/${TEST_ADDRESSES.evil}/80; printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3; head -n 1 <&3'`,
          `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}' 2>/dev/null || echo loopback-refused`,
          `bash -c 'exec 3<>/dev/tcp/${TEST_ADDRESSES.hostPrivate}/${port}; printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3; head -n 1 <&3'`,
        ].join('; '),
      );
      expect(r.out.split('\n').map((l) => l.trim())).toEqual([
        'lo',
        'resolves',
        'hello from pub.test',
        'HTTP/1.1 403 Forbidden',
        'loopback-refused',
        'HTTP/1.1 403 Forbidden',
        '',
      ]);
      expect(hits).toBe(0);
      const records = await fx().cp.audit(sb.id, { kind: 'network' });
      expect(records.find((e) => e.port === 80 && e.name === 'pub.test')).toMatchObject({
        decision: 'allow',
      });
      expect(records.some((e) => e.address === TEST_ADDRESSES.hostPrivate && e.decision === 'deny')).toBe(
        true,
      );
    });
  },
);
