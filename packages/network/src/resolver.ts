// How the policy point resolves names: an operator's hosts file first (tests map their names to
// addresses of their own this way), then the host's resolver (getaddrinfo, so /etc/hosts and
// resolv.conf apply as for any program on the host). Answers are kept briefly, and the policy point
// remembers which addresses it gave the sandbox for which names (a connection without SNI or Host to
// an address is matched by those names).
import { readFileSync } from 'node:fs';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { canonicalAddress } from './addresses.js';

/** How long an upstream answer is reused, and how long an address keeps the names it was given for. */
const CACHE_MS = 30_000;
const MAX_REMEMBERED = 4_096;

export interface ResolverOptions {
  /** `/etc/hosts` format: `ADDRESS NAME…` per line, `#` comments. */
  readonly hostsFile?: string;
}

export class Resolver {
  readonly #hosts = new Map<string, string[]>();
  readonly #cache = new Map<string, { addresses: string[]; until: number }>();
  /** address → names the sandbox was told resolve to it, with when that expires. */
  readonly #given = new Map<string, Map<string, number>>();

  constructor(options: ResolverOptions = {}) {
    if (options.hostsFile !== undefined) this.#loadHosts(options.hostsFile);
  }

  #loadHosts(file: string): void {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const [address, ...names] = (line.split('#')[0] ?? '').trim().split(/\s+/);
      if (address === undefined || isIP(address) === 0) continue;
      for (const name of names) {
        const key = name.toLowerCase();
        this.#hosts.set(key, [...(this.#hosts.get(key) ?? []), canonicalAddress(address)]);
      }
    }
  }

  /** Every address of `name` (IPv4 and IPv6); empty when it does not resolve. */
  async resolve(name: string): Promise<string[]> {
    const fixed = this.#hosts.get(name);
    if (fixed !== undefined) return fixed;
    const now = Date.now();
    const cached = this.#cache.get(name);
    if (cached !== undefined && cached.until > now) return cached.addresses;
    let addresses: string[];
    try {
      const found = await lookup(name, { all: true, verbatim: true });
      addresses = [...new Set(found.map((a) => canonicalAddress(a.address)))];
    } catch {
      addresses = [];
    }
    if (this.#cache.size >= MAX_REMEMBERED) this.#cache.clear();
    this.#cache.set(name, { addresses, until: now + CACHE_MS });
    return addresses;
  }

  /** Records that the sandbox was told `name` resolves to `addresses`. */
  remember(name: string, addresses: readonly string[]): void {
    const until = Date.now() + CACHE_MS;
    if (this.#given.size >= MAX_REMEMBERED) this.#given.clear();
    for (const address of addresses) {
      const names = this.#given.get(address) ?? new Map<string, number>();
      names.set(name, until);
      this.#given.set(address, names);
    }
  }

  /**
   * Until when (ms since the epoch) this resolver holds `name` to be at `address`: the later of the
   * sandbox's answer for it and the kept upstream answer; 0 when it does not. A decision that rested
   * on it is not reused past that time.
   */
  knownUntil(name: string, address: string): number {
    const canonical = canonicalAddress(address);
    if (this.#hosts.get(name)?.includes(canonical) === true) return Date.now() + CACHE_MS;
    const given = this.#given.get(canonical)?.get(name) ?? 0;
    const cached = this.#cache.get(name);
    const kept = cached !== undefined && cached.addresses.includes(canonical) ? cached.until : 0;
    return Math.max(given, kept);
  }

  /** The names the sandbox was recently told resolve to `address`. */
  namesFor(address: string): string[] {
    const names = this.#given.get(canonicalAddress(address));
    if (names === undefined) return [];
    const now = Date.now();
    return [...names].filter(([, until]) => until > now).map(([name]) => name);
  }
}
