// Which destination addresses are ever reachable: the host itself never (its loopback, its own
// addresses, unspecified and multicast addresses), special ranges (private, CGNAT, link-local with the
// cloud metadata service, ULA, reserved) only when a CIDR rule names them, public ones per the rules.
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';

export type AddressClass = 'never' | 'special' | 'public';

function blockList(ranges: readonly string[]): BlockList {
  const list = new BlockList();
  for (const range of ranges) {
    const [net = '', prefix = ''] = range.split('/');
    list.addSubnet(net, Number(prefix), net.includes(':') ? 'ipv6' : 'ipv4');
  }
  return list;
}

const NEVER = blockList([
  '0.0.0.0/8',
  '127.0.0.0/8',
  '224.0.0.0/4',
  '255.255.255.255/32',
  '::/128',
  '::1/128',
  '::/96', // IPv4-compatible (deprecated): never a real destination
  'ff00::/8',
]);

const SPECIAL = blockList([
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '100.64.0.0/10', // CGNAT
  '169.254.0.0/16', // link-local, 169.254.169.254 (cloud metadata)
  '192.0.0.0/24', // IETF protocol assignments
  '198.18.0.0/15', // benchmarking
  '240.0.0.0/4', // reserved
  'fc00::/7', // ULA
  'fe80::/10', // link-local
  '64:ff9b::/96', // NAT64: reaches IPv4 space through a translator
  '2002::/16', // 6to4: embeds an IPv4 address
]);

const MAPPED = blockList(['::ffff:0:0/96']);

/** The eight 16-bit groups of an IPv6 address (any spelling: `::`, a trailing dotted quad). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad !== null) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const part = (s: string): number[] => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const left = part(head);
  const right = tail === undefined ? [] : part(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/**
 * One spelling per address, so that every check and every rule sees the same one: lower case, and an
 * IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, `::ffff:a00:1`) as its IPv4 address — it reaches that
 * IPv4 host, and a rule or class written for the IPv4 address must apply to it.
 */
export function canonicalAddress(address: string): string {
  const lower = address.toLowerCase();
  if (isIP(lower) !== 6 || !MAPPED.check(lower, 'ipv6')) return lower;
  const groups = ipv6Groups(lower);
  const high = groups[6] ?? 0;
  const low = groups[7] ?? 0;
  return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
}

/** The host's own addresses, read when the policy point starts (and refreshed by `refreshHostAddresses`). */
let hostAddresses = new Set<string>();

/**
 * Classes already worked out, per spelling: each costs two BlockList checks (microseconds through
 * Node's C++ side) and every new connection asks for its address's. Emptied with the host's addresses
 * and when full.
 */
const classes = new Map<string, AddressClass>();
const CLASSES_LIMIT = 4_096;

/** Bumped at each refresh: a decision remembered under an older one may name a host address now. */
let hostAddressesVersion = 0;

/** The version of the host's addresses the classes are worked out against. */
export function hostAddressesSeen(): number {
  return hostAddressesVersion;
}

export function refreshHostAddresses(): void {
  hostAddressesVersion++;
  classes.clear();
  const next = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const info of list ?? []) next.add(canonicalAddress(info.address.split('%')[0] ?? ''));
  }
  hostAddresses = next;
}
refreshHostAddresses();

export function classifyAddress(address: string): AddressClass {
  const known = classes.get(address);
  if (known !== undefined) return known;
  const cls = classify(address);
  if (classes.size >= CLASSES_LIMIT) classes.clear();
  classes.set(address, cls);
  return cls;
}

function classify(address: string): AddressClass {
  const canonical = canonicalAddress(address);
  const family = isIP(canonical);
  if (family === 0) return 'never';
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (NEVER.check(canonical, type) || hostAddresses.has(canonical)) return 'never';
  return SPECIAL.check(canonical, type) ? 'special' : 'public';
}

/** Whether `address` lies in `cidr` (both already validated; `a.b.c.d/n` or `v6/n`). */
export function cidrContains(cidr: string, address: string): boolean {
  const canonical = canonicalAddress(address);
  const family = isIP(canonical);
  const [net = '', prefix = ''] = cidr.split('/');
  if (family === 0 || isIP(net) !== family) return false;
  const list = new BlockList();
  const type = family === 4 ? 'ipv4' : 'ipv6';
  list.addSubnet(net, Number(prefix), type);
  return list.check(canonical, type);
}
