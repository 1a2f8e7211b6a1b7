/**
 * Which addresses Switchboard refuses to call unless private URLs are allowed (SWITCHBOARD_ALLOW_PRIVATE_URLS):
 * every block of IANA's special-purpose address registries, IPv4 and IPv6 (RFC 6890 and its updates), multicast,
 * and the addresses of this machine's own interfaces. A URL registered as an agent or a webhook is a stranger's:
 * a special-use address is either not on the public Internet (loopback, private, link-local with the cloud
 * metadata service, documentation ranges that a host may use for itself) or something no agent is (benchmarking,
 * relays, AS112), and a machine's own address reaches whatever listens on 0.0.0.0 beside Switchboard.
 */
import * as net from 'node:net';
import { networkInterfaces } from 'node:os';

/** IANA IPv4 Special-Purpose Address Registry (all of it, also the blocks it marks globally reachable), plus multicast. */
const V4_BLOCKS: readonly (readonly [string, number])[] = [
  ['0.0.0.0', 8], // "this network" (RFC 791)
  ['10.0.0.0', 8], // private (RFC 1918)
  ['100.64.0.0', 10], // shared address space, carrier-grade NAT (RFC 6598)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, incl. cloud metadata at 169.254.169.254 (RFC 3927)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments (RFC 6890), incl. DS-Lite, NAT64 discovery, TURN anycast
  ['192.0.2.0', 24], // documentation, TEST-NET-1 (RFC 5737)
  ['192.31.196.0', 24], // AS112-v4 (RFC 7535)
  ['192.52.193.0', 24], // AMT (RFC 7450)
  ['192.88.99.0', 24], // deprecated 6to4 relay anycast (RFC 7526)
  ['192.168.0.0', 16], // private
  ['192.175.48.0', 24], // direct delegation AS112 service (RFC 7534)
  ['198.18.0.0', 15], // benchmarking (RFC 2544)
  ['198.51.100.0', 24], // documentation, TEST-NET-2
  ['203.0.113.0', 24], // documentation, TEST-NET-3
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, incl. limited broadcast 255.255.255.255
];

/** IANA IPv6 Special-Purpose Address Registry, plus multicast and the deprecated site-local block. */
const V6_BLOCKS: readonly (readonly [string, number])[] = [
  ['::', 96], // ::, ::1 and the deprecated IPv4-compatible ::a.b.c.d (IPv4-mapped and NAT64 are checked as IPv4)
  ['64:ff9b:1::', 48], // local-use NAT64 (RFC 8215): translates to whatever the local network chooses
  ['100::', 64], // discard-only (RFC 6666)
  ['100:0:0:1::', 64], // dummy IPv6 prefix (RFC 9780)
  ['2001::', 23], // IETF protocol assignments: Teredo, benchmarking, AMT, AS112, ORCHID, DRIP (RFC 2928)
  ['2001:db8::', 32], // documentation (RFC 3849)
  ['2002::', 16], // 6to4: carries an IPv4 address of anyone's choosing (RFC 3056)
  ['2620:4f:8000::', 48], // direct delegation AS112 service (RFC 7534)
  ['3fff::', 20], // documentation (RFC 9637)
  ['5f00::', 16], // segment routing SIDs (RFC 9602)
  ['fc00::', 7], // unique local (RFC 4193)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // deprecated site-local
  ['ff00::', 8], // multicast
];

const specialUse = new net.BlockList();
for (const [prefix, bits] of V4_BLOCKS) specialUse.addSubnet(prefix, bits, 'ipv4');
for (const [prefix, bits] of V6_BLOCKS) specialUse.addSubnet(prefix, bits, 'ipv6');

/** The eight 16-bit words of an IPv6 address already validated by net.isIP. */
function ipv6Words(address: string): number[] {
  let text = address;
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    const [a, b, c, d] = tail.split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, rest] = text.split('::') as [string, string | undefined];
  const left = head ? head.split(':') : [];
  const right = rest ? rest.split(':') : [];
  const words = rest === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return words.map((w) => parseInt(w, 16));
}

/** The IPv4 address carried by an IPv4-mapped (::ffff:0:0/96) or NAT64 (64:ff9b::/96) address. */
function embeddedIPv4(address: string): string | undefined {
  const w = ipv6Words(address);
  const zeroPrefix = (from: number, to: number) => w.slice(from, to).every((x) => x === 0);
  const mapped = zeroPrefix(0, 5) && w[5] === 0xffff;
  const nat64 = w[0] === 0x64 && w[1] === 0xff9b && zeroPrefix(2, 6);
  if (!mapped && !nat64) return undefined;
  return [w[6]! >> 8, w[6]! & 0xff, w[7]! >> 8, w[7]! & 0xff].join('.');
}

/** How long the list of this machine's interface addresses is trusted before it is read again. */
const OWN_ADDRESSES_TTL_MS = 10_000;
let own: { until: number; list: net.BlockList } | undefined;

/** This machine's interface addresses (read again every few seconds: interfaces come and go). */
function ownAddresses(): net.BlockList {
  if (own && own.until > Date.now()) return own.list;
  const list = new net.BlockList();
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) list.addAddress(a.address.replace(/%.*$/, ''), a.family === 'IPv6' ? 'ipv6' : 'ipv4');
  }
  own = { until: Date.now() + OWN_ADDRESSES_TTL_MS, list };
  return list;
}

/** Whether `address` (a validated IP literal, no brackets or zone) is one of this machine's interface addresses. */
export function isOwnAddress(address: string): boolean {
  const family = net.isIP(address);
  return family !== 0 && ownAddresses().check(address, family === 6 ? 'ipv6' : 'ipv4');
}

function refusedV4(address: string): boolean {
  return specialUse.check(address, 'ipv4') || isOwnAddress(address);
}

/**
 * True for addresses Switchboard must not call unless private URLs are allowed: special-use blocks (above) and
 * this machine's own addresses. Accepts IPv4/IPv6 literals (brackets and %zone are ignored). Anything that is not
 * an IP address returns true, so a caller's parsing slip fails closed. Never throws.
 */
export function isPrivateAddress(ip: string): boolean {
  const address = ip.trim().replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
  const family = net.isIP(address);
  if (family === 4) return refusedV4(address);
  if (family !== 6) return true;
  const v4 = embeddedIPv4(address);
  return (v4 !== undefined && refusedV4(v4)) || specialUse.check(address, 'ipv6') || isOwnAddress(address);
}
