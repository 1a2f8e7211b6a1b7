/**
 * Page tokens, written once: the keyset cursor of the last row of a page, as base64url JSON. A token is opaque to
 * clients; reading one back checks it strictly, so a made-up or tampered token is the caller's 400 / -32602, never
 * a query error (issue 32: `{"t":"1 2"}` reached PostgreSQL's timestamptz parser, and its message the client).
 * Every field a cursor carries into SQL is one of the kinds below, each checked to what PostgreSQL accepts for the
 * cast it meets there: text without U+0000, a timestamp in range, a real, a bigint.
 */
import { z } from 'zod';

/** A page token that is not one the endpoint handed out: the caller's 400. */
export class PageTokenError extends Error {}

/** Longer than any token Switchboard issues. */
const MAX_TOKEN_CHARS = 2048;

export function encodePageToken(cursor: unknown): string {
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

/** The cursor in `token`, or undefined when it is not one of `shape` (the caller raises its own error). */
export function decodePageToken<T>(token: string, shape: z.ZodType<T>): T | undefined {
  if (token.length > MAX_TOKEN_CHARS || !/^[A-Za-z0-9_-]*$/.test(token)) return undefined;
  try {
    const parsed = shape.safeParse(JSON.parse(Buffer.from(token, 'base64url').toString('utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** An id compared as text: anything PostgreSQL's text takes (not U+0000), as long as the ids it follows. */
export const cursorText = z.string().min(1).max(1024).regex(/^[^\u0000]+$/);

const DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
// The two forms issued: to_char's UTC `2026-11-01T20:05:03.123456Z`, and timestamptz::text
// `2026-11-01 20:05:03.123456+00` (its offset may carry minutes and seconds).
const TIMESTAMP = /^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.\d{1,6})?(?:Z|[+-](\d\d)(?::(\d\d)(?::(\d\d))?)?)$/;

/** Whether `s` is a timestamp of those forms that `::timestamptz` accepts: every field in its range. */
function isTimestamp(s: string): boolean {
  const m = TIMESTAMP.exec(s);
  if (!m) return false;
  const [year, month, day, hour, minute, second, offH = 0, offM = 0, offS = 0] = m.slice(1).map((v) => (v === undefined ? undefined : Number(v))) as number[];
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return (
    year >= 1 && month >= 1 && month <= 12 && day >= 1 && day <= (month === 2 && !leap ? 28 : DAYS[month - 1]!) &&
    hour < 24 && minute < 60 && second < 60 && offH <= 15 && offM < 60 && offS < 60
  );
}
export const cursorTimestamp = z.string().max(40).refine(isTimestamp);

/** A `::real` (ts_rank's float4 as text): a plain decimal PostgreSQL parses within float4's range (or zero). */
export const cursorReal = z
  .string()
  .max(40)
  .regex(/^-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?$/)
  .refine((s) => {
    const v = Math.abs(Number(s));
    return v === 0 || (v >= 1e-37 && v <= 1e38);
  });

/** A `::bigint` id: digits, within int8. */
export const cursorBigint = z.string().regex(/^\d{1,19}$/).refine((s) => BigInt(s) <= 9223372036854775807n);
