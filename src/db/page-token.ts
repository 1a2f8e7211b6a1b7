/**
 * Page tokens, written once: the keyset cursor of the last row of a page, as base64url JSON. A token is opaque to
 * clients; reading one back validates its shape, so a made-up or tampered token is the caller's 400 / -32602,
 * never a query error.
 */
import type { z } from 'zod';

/** A page token that is not one the endpoint handed out: the caller's 400. */
export class PageTokenError extends Error {}

export function encodePageToken(cursor: unknown): string {
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

/** The cursor in `token`, or undefined when it is not one of `shape` (the caller raises its own error). */
export function decodePageToken<T>(token: string, shape: z.ZodType<T>): T | undefined {
  try {
    const parsed = shape.safeParse(JSON.parse(Buffer.from(token, 'base64url').toString('utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
