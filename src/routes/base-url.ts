import type { FastifyRequest } from 'fastify';

/** The gateway's base URL as the caller reaches it: SWITCHBOARD_PUBLIC_URL when set, else the request's own. */
export function baseUrlOf(req: FastifyRequest, publicUrl?: string): string {
  if (publicUrl) return publicUrl.replace(/\/+$/, '');
  return `${req.protocol}://${req.host}`;
}

/** A request header's value; for one sent several times, the first. */
export const firstValue = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);
