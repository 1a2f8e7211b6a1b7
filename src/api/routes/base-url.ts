import type { FastifyRequest } from 'fastify';

/** The gateway's base URL as the caller reaches it: SWITCHBOARD_PUBLIC_URL when set, else the request's own. */
export function baseUrlOf(req: FastifyRequest, publicUrl?: string): string {
  if (publicUrl) return publicUrl.replace(/\/+$/, '');
  return `${req.protocol}://${req.host}`;
}

export { firstValue } from '../../core/http/headers';
