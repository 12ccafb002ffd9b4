// One sandbox's placement, derived from its SandboxClaim and the pods agent-sandbox runs for it. The
// claim's Ready condition says whether agent-sandbox considers the sandbox up; the pods say where, and
// whether a pod that was serving went away with its node. Each change is reported once.
import type { LostReason, PlacementStatus } from '../types.js';
import type { Condition, SandboxClaim } from './objects.js';
import { condition, isGoing, isServing, wentWithNode, type Pod } from './pods.js';

/**
 * Ready=False reasons after which agent-sandbox will not bring the claim up by itself: the pool or
 * template is missing, the claim is refused, or its lifetime ran out.
 */
const FAILED_REASONS = new Set([
  'WarmPoolNotFound',
  'TemplateNotFound',
  'InvalidMetadata',
  'EnvVarsInjectionRejected',
  'VolumeClaimTemplatesError',
  'ClaimExpired',
  'SandboxExpired',
]);

function readyCondition(claim: SandboxClaim): Condition | undefined {
  return claim.status?.conditions?.find((c) => c.type === 'Ready');
}

function lostDetail(reason: LostReason, node: string | undefined, pod: Pod | undefined): string {
  const why = pod === undefined ? undefined : condition(pod, 'DisruptionTarget');
  const cause = why === undefined ? '' : ` (${why.reason ?? ''}: ${why.message ?? ''})`;
  const what = 'its processes and sessions there ended, and changes since its last checkpoint stayed there';
  return reason === 'node-lost'
    ? `node ${node ?? '?'} went away${cause}; ${what}`
    : `its pod on node ${node ?? '?'} went away${cause}; ${what}`;
}

export class PlacementTracker {
  /** The pod that was serving when the sandbox was last reported ready, as last seen. */
  private servingPod: Pod | undefined;
  private last: PlacementStatus | undefined;

  constructor(readonly sandboxId: string) {}

  /** The statuses to report after a change to the claim (`undefined`: deleted) or to its pods. */
  update(claim: SandboxClaim | undefined, pods: readonly Pod[]): PlacementStatus[] {
    const out: PlacementStatus[] = [];
    const sandboxId = this.sandboxId;
    if (claim === undefined) {
      this.emit(out, { state: 'gone', sandboxId });
      return out;
    }
    if (claim.metadata.deletionTimestamp != null) {
      // Being removed on purpose: its pod going away is not a loss.
      this.servingPod = undefined;
      this.emit(out, { state: 'pending', sandboxId, detail: 'being removed' });
      return out;
    }
    const servingUid = this.servingPod?.metadata?.uid;
    if (servingUid !== undefined) {
      const now = pods.find((p) => p.metadata?.uid === servingUid);
      if (now !== undefined) this.servingPod = now;
      if (now === undefined || isGoing(now)) {
        // Evidence of a node's loss lives on the pod (DisruptionTarget); a pod that vanished without it
        // is reported as the container's loss.
        const reason: LostReason = wentWithNode(this.servingPod!) ? 'node-lost' : 'container-lost';
        const nodeName = this.servingPod!.spec?.nodeName;
        const detail = lostDetail(reason, nodeName, this.servingPod);
        this.servingPod = undefined;
        this.emit(out, { state: 'lost', sandboxId, reason, nodeName, detail, replaced: true });
      }
    }
    const ready = readyCondition(claim);
    if (ready?.status === 'False' && FAILED_REASONS.has(ready.reason ?? '')) {
      const nodeName = this.servingPod?.spec?.nodeName;
      const detail = `${ready.reason ?? ''}: ${ready.message ?? ''}`;
      this.emit(out, { state: 'lost', sandboxId, reason: 'failed', nodeName, detail, replaced: false });
      return out;
    }
    const serving = pods.find(isServing);
    if (ready?.status === 'True' && serving !== undefined) {
      this.servingPod = serving;
      const nodeName = serving.spec!.nodeName!;
      this.emit(out, { state: 'ready', sandboxId, nodeName, podIP: serving.status!.podIP! });
      return out;
    }
    const detail =
      ready === undefined
        ? 'waiting for agent-sandbox to take the claim'
        : ready.status === 'True'
          ? 'the claim is ready; waiting to see its pod serve'
          : `${ready.reason ?? ready.status}${ready.message ? `: ${ready.message}` : ''}`;
    this.emit(out, { state: 'pending', sandboxId, detail });
    return out;
  }

  private emit(out: PlacementStatus[], status: PlacementStatus): void {
    if (this.last !== undefined && JSON.stringify(this.last) === JSON.stringify(status)) return;
    // A failed placement stays failed until its claim is deleted.
    if (this.last?.state === 'lost' && !this.last.replaced && status.state !== 'gone') return;
    if (this.last?.state === 'gone') return;
    this.last = status;
    out.push(status);
  }
}
