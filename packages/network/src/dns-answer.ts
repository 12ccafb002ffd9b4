// The sandbox's DNS server: every question is answered here, never forwarded as asked. A name the
// policy does not allow is NXDOMAIN without any upstream query (a query is itself a way out); an allowed
// name is resolved on the host and answered with only the addresses the policy lets the sandbox dial.
import { decode, encode } from 'dns-packet';
import type { Answer, Packet } from 'dns-packet';
import { isIP } from 'node:net';
import type { CompiledPolicy, Decision } from './decide.js';
import type { Resolver } from './resolver.js';

const TTL_SECONDS = 30;

export interface DnsOutcome {
  /** The answer to send; null when the query could not be parsed (dropped, as a resolver would). */
  readonly response: Buffer | null;
  readonly name?: string;
  readonly type?: string;
  readonly decision?: Decision;
  readonly addresses?: readonly string[];
}

export async function answerDns(
  query: Buffer,
  policy: () => CompiledPolicy,
  resolver: Resolver,
): Promise<DnsOutcome> {
  let packet: Packet;
  try {
    packet = decode(query);
  } catch {
    return { response: null };
  }
  const question = packet.questions?.[0];
  if (question === undefined || packet.type !== 'query') return { response: null };
  const name = question.name.toLowerCase().replace(/\.$/, '');
  const reply = (rcode: 'NOERROR' | 'NXDOMAIN' | 'REFUSED', answers: Answer[]): Buffer =>
    encode({
      id: packet.id ?? 0,
      type: 'response',
      // RD copied from the query, RA set: we are the sandbox's recursive resolver.
      flags: ((packet.flags ?? 0) & 0x0100) | 0x0080 | rcodeBits(rcode),
      questions: [question],
      answers,
    });
  const decision = policy().mayResolve(name);
  if (!decision.allowed) {
    return { response: reply('NXDOMAIN', []), name, type: question.type, decision };
  }
  const all = await resolver.resolve(name);
  // Re-read the policy: a change may have landed during the lookup.
  const current = policy();
  const usable = all.filter((address) => current.decide({ name, address }).allowed);
  if (usable.length === 0) {
    const why =
      all.length === 0
        ? { allowed: false, reason: 'the name does not resolve' }
        : current.decide({ name, address: all[0] ?? '' });
    return { response: reply('NXDOMAIN', []), name, type: question.type, decision: why };
  }
  resolver.remember(name, usable);
  const family = question.type === 'A' ? 4 : question.type === 'AAAA' ? 6 : 0;
  const answers: Answer[] = usable
    .filter((address) => isIP(address) === family)
    .map((address): Answer => ({
      type: family === 4 ? 'A' : 'AAAA',
      name: question.name,
      ttl: TTL_SECONDS,
      data: address,
    }));
  return { response: reply('NOERROR', answers), name, type: question.type, decision, addresses: usable };
}

function rcodeBits(rcode: 'NOERROR' | 'NXDOMAIN' | 'REFUSED'): number {
  return rcode === 'NOERROR' ? 0 : rcode === 'NXDOMAIN' ? 3 : 5;
}
