// The frame of every test file that compares one of the policy point's C paths with its JavaScript path:
// one test net and temporary directory for the file, the same cases run once through a policy point with
// the C path off and once with it on (each in a namespace of its own), and a last case checking that both
// wrote the same audit records, field for field; and the set-up of the attack files against one C path.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NetworkAuditEvent } from '@agentfense/network';
import type { PolicyPoint } from '../../packages/network/src/policy-point.js';
import type { NetworkPolicy } from '../../packages/network/src/policy.js';
import { decided, fastPathPoint, keepAliveDestination } from './fast-path-point.js';
import type { KeepAliveDestination } from './fast-path-point.js';
import { makeTestNet } from './test-net.js';
import type { TestNet } from './test-net.js';

/** One of the two paths, as its cases see it (the point and namespace once made). */
export interface PathUnderTest {
  /** The C path is on. */
  readonly fast: boolean;
  readonly net: TestNet;
  readonly point: PolicyPoint;
  readonly ns: string;
  /** The audit records this path's point wrote. */
  readonly audit: readonly NetworkAuditEvent[];
}

export interface ComparisonOptions {
  /** Prefix of the file's temporary directory. */
  readonly tmpPrefix: string;
  /** The C path's name in the cases' titles, e.g. `the C CONNECT path`. */
  readonly cPath: string;
  readonly policy: NetworkPolicy;
  readonly maxConnections: number;
  /** The features that make the C path: on for it, off for JavaScript. */
  readonly features: readonly string[];
  /** Features on for both (e.g. the accept path the C path starts from). */
  readonly common: readonly string[];
}

/** Registers the file's set-up, `cases` under both paths, and the audit comparison. */
export function describeAgainstJavaScript(
  options: ComparisonOptions,
  cases: (path: PathUnderTest) => void,
): void {
  let net: TestNet | undefined;
  let dir = '';
  beforeAll(async () => {
    net = await makeTestNet();
    dir = await mkdtemp(join(tmpdir(), options.tmpPrefix));
  }, 60_000);
  afterAll(async () => {
    await net?.close();
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });

  const paths = [false, true].map((fast) => {
    const audit: NetworkAuditEvent[] = [];
    const made: { point?: PolicyPoint; ns?: string } = {};
    const path: PathUnderTest = {
      fast,
      audit,
      get net() {
        if (net === undefined) throw new Error('the test net is made in beforeAll');
        return net;
      },
      get point() {
        if (made.point === undefined) throw new Error('the policy point is made in beforeAll');
        return made.point;
      },
      get ns() {
        if (made.ns === undefined) throw new Error('the namespace is made in beforeAll');
        return made.ns;
      },
    };
    return { label: fast ? options.cPath : 'the JavaScript path', path, made, audit };
  });

  describe.each(paths)('$label', ({ path, made, audit }) => {
    let close: (() => Promise<void>) | undefined;
    beforeAll(async () => {
      // Explicit both ways, so neither case depends on the default or on the caller's environment.
      const started = await fastPathPoint({
        dir,
        name: path.fast ? 'fast' : 'js',
        policy: options.policy,
        hostsFile: path.net.hostsFile,
        maxConnections: options.maxConnections,
        enable: path.fast ? [...options.common, ...options.features] : [...options.common],
        disable: path.fast ? [] : [...options.features],
        audit: (event) => audit.push(event),
      });
      made.point = started.point;
      made.ns = started.ns;
      close = started.close;
    }, 30_000);
    afterAll(() => close?.());
    cases(path);
  });

  describe('both paths', () => {
    it('wrote the same audit records, field for field (time, duration and byte counts aside)', () => {
      const [js, c] = paths.map((p) => p.audit);
      expect(js?.length).toBeGreaterThan(0);
      const sorted = (list: readonly NetworkAuditEvent[] = []): string[] =>
        list.map((e) => JSON.stringify(decided(e))).sort();
      expect(sorted(c)).toEqual(sorted(js));
    });
  });
}

/** The policed namespace of an attack file (useAttackPoint), once made. */
export interface AttackPoint {
  readonly point: PolicyPoint;
  readonly ns: string;
  readonly destination: KeepAliveDestination;
}

/**
 * The set-up of an attack file against one C plain-HTTP path: the test net, a keep-alive destination on
 * `port` in it, and one policy point with exactly `enable` on; all removed after the file.
 */
export function useAttackPoint(options: {
  readonly tmpPrefix: string;
  readonly port: number;
  readonly policy: NetworkPolicy;
  readonly enable: readonly string[];
}): AttackPoint {
  let made: (AttackPoint & { net: TestNet; dir: string; close: () => Promise<void> }) | undefined;
  beforeAll(async () => {
    const net = await makeTestNet();
    const dir = await mkdtemp(join(tmpdir(), options.tmpPrefix));
    const destination = keepAliveDestination(net.nsPath, options.port);
    const { point, ns, close } = await fastPathPoint({
      dir,
      name: 'ns',
      policy: options.policy,
      hostsFile: net.hostsFile,
      maxConnections: 8,
      enable: options.enable,
      disable: [],
      audit: () => {},
    });
    made = { point, ns, destination, net, dir, close };
  }, 60_000);
  afterAll(async () => {
    if (made === undefined) return;
    await made.close();
    made.destination.close();
    await made.net.close();
    await rm(made.dir, { recursive: true, force: true });
  });
  const ready = (): AttackPoint => {
    if (made === undefined) throw new Error('the policy point is made in beforeAll');
    return made;
  };
  return {
    get point() {
      return ready().point;
    },
    get ns() {
      return ready().ns;
    },
    get destination() {
      return ready().destination;
    },
  };
}
