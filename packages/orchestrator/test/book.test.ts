// The watch's book after a re-list: claims and pods missing from a fresh list are settled (gone, lost),
// and nothing is reported until both lists are in.
import { describe, expect, it } from 'vitest';
import { PlacementBook } from '../src/kubernetes/book.js';
import type { SandboxClaim } from '../src/kubernetes/index.js';
import type { Pod } from '../src/kubernetes/pods.js';
import { fixture } from './replay.js';
import { SANDBOX } from './setup.js';

const claims = fixture<{ items: SandboxClaim[] }>('claims-list-ready.json').items;
const pods = fixture<{ items: Pod[] }>('pods-list-node-a.json').items;
const READY = { state: 'ready', sandboxId: SANDBOX, nodeName: 'node-a', podIP: '10.244.1.17' };

describe('PlacementBook', () => {
  it('reports nothing until claims and pods are both listed, then each sandbox once', () => {
    const book = new PlacementBook();
    expect(book.resetClaims(claims)).toEqual([]);
    expect(book.resetPods(pods)).toEqual([READY]);
    expect(book.resetPods(pods)).toEqual([]);
  });

  it('a claim missing from a re-list is gone', () => {
    const book = new PlacementBook();
    book.resetClaims(claims);
    book.resetPods(pods);
    expect(book.resetClaims([])).toEqual([{ state: 'gone', sandboxId: SANDBOX }]);
  });

  it('a serving pod missing from a re-list, without a word from its node, is a container lost', () => {
    const book = new PlacementBook();
    book.resetClaims(claims);
    book.resetPods(pods);
    const [lost, ...rest] = book.resetPods([]);
    expect(lost).toMatchObject({
      state: 'lost',
      reason: 'container-lost',
      nodeName: 'node-a',
      replaced: true,
    });
    // The claim still says Ready: the sandbox waits to see a pod serve again.
    expect(rest).toEqual([
      { state: 'pending', sandboxId: SANDBOX, detail: 'the claim is ready; waiting to see its pod serve' },
    ]);
  });

  it("ignores claims that are not the adapter's", () => {
    const book = new PlacementBook();
    const foreign = structuredClone(claims[0]!);
    foreign.metadata.labels = { 'app.kubernetes.io/managed-by': 'someone-else' };
    book.resetPods([]);
    expect(book.resetClaims([foreign])).toEqual([]);
  });
});
