// What the adapter's watch knows: the adapter's claims by sandbox id, the pods agent-sandbox runs for
// them (by the claim uid it labels each pod with), and a tracker per sandbox. Claims and pods arrive on
// two streams in any order; every change re-derives the sandboxes it touches.
import type { PlacementStatus } from '../types.js';
import { CLAIM_UID_LABEL, sandboxIdOf, type SandboxClaim } from './objects.js';
import type { Pod } from './pods.js';
import { PlacementTracker } from './tracker.js';

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export class PlacementBook {
  private readonly claims = new Map<string, SandboxClaim>();
  private readonly trackers = new Map<string, PlacementTracker>();
  /** Pods by claim uid, then pod uid. */
  private readonly pods = new Map<string, Map<string, Pod>>();
  /** Nothing is reported until both first lists are in: a claim seen without its pods is not pending. */
  private claimsListed = false;
  private podsListed = false;

  /** A full list of the adapter's claims (after a (re)list): claims missing from it are gone. */
  resetClaims(items: readonly SandboxClaim[]): PlacementStatus[] {
    const out: PlacementStatus[] = [];
    const seen = new Set<string>();
    for (const claim of items) {
      const id = sandboxIdOf(claim);
      if (id === undefined) continue;
      seen.add(id);
      out.push(...this.claimChanged('MODIFIED', claim));
    }
    for (const [id, claim] of [...this.claims]) {
      if (!seen.has(id)) out.push(...this.claimChanged('DELETED', claim));
    }
    return this.listed('claims', out);
  }

  private listed(which: 'claims' | 'pods', out: PlacementStatus[]): PlacementStatus[] {
    const wasSynced = this.claimsListed && this.podsListed;
    if (which === 'claims') this.claimsListed = true;
    else this.podsListed = true;
    if (wasSynced) return out;
    if (!(this.claimsListed && this.podsListed)) return [];
    return [...this.claims].flatMap(([id, claim]) =>
      this.trackers.get(id)!.update(claim, this.podsOf(claim)),
    );
  }

  private get synced(): boolean {
    return this.claimsListed && this.podsListed;
  }

  /** A full list of the sandbox pods: pods missing from it were deleted. */
  resetPods(items: readonly Pod[]): PlacementStatus[] {
    const before = [...this.pods.keys()];
    this.pods.clear();
    for (const pod of items) this.storePod(pod);
    const touched = new Set([...before, ...this.pods.keys()]);
    return this.listed(
      'pods',
      [...touched].flatMap((uid) => this.rederive(uid)),
    );
  }

  claimChanged(type: ChangeType, claim: SandboxClaim): PlacementStatus[] {
    const id = sandboxIdOf(claim);
    if (id === undefined) return [];
    let tracker = this.trackers.get(id);
    if (tracker === undefined) {
      if (type === 'DELETED') return [];
      tracker = new PlacementTracker(id);
      this.trackers.set(id, tracker);
    }
    if (type === 'DELETED') {
      this.claims.delete(id);
      this.trackers.delete(id);
      return this.synced ? tracker.update(undefined, []) : [];
    }
    this.claims.set(id, claim);
    return this.synced ? tracker.update(claim, this.podsOf(claim)) : [];
  }

  podChanged(type: ChangeType, pod: Pod): PlacementStatus[] {
    const claimUid = pod.metadata?.labels?.[CLAIM_UID_LABEL];
    const podUid = pod.metadata?.uid;
    if (claimUid === undefined || podUid === undefined) return [];
    if (type === 'DELETED') this.pods.get(claimUid)?.delete(podUid);
    else this.storePod(pod);
    return this.rederive(claimUid);
  }

  private storePod(pod: Pod): void {
    const claimUid = pod.metadata?.labels?.[CLAIM_UID_LABEL];
    const podUid = pod.metadata?.uid;
    if (claimUid === undefined || podUid === undefined) return;
    let byUid = this.pods.get(claimUid);
    if (byUid === undefined) this.pods.set(claimUid, (byUid = new Map<string, Pod>()));
    byUid.set(podUid, pod);
  }

  private podsOf(claim: SandboxClaim): Pod[] {
    const uid = claim.metadata.uid;
    return uid === undefined ? [] : [...(this.pods.get(uid)?.values() ?? [])];
  }

  private rederive(claimUid: string): PlacementStatus[] {
    if (!this.synced) return [];
    for (const [id, claim] of this.claims) {
      if (claim.metadata.uid === claimUid) return this.trackers.get(id)!.update(claim, this.podsOf(claim));
    }
    return [];
  }
}
