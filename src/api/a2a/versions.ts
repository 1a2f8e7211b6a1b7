/** The A2A protocol versions Switchboard serves, and the one a request asks for. */

/** 1.0 and 0.3 (a patch level may follow: 1.0.1). A 0.3 client may send no version at all (A2A §3.6.2). */
export const SUPPORTED_VERSION = /^(1\.0|0\.3)(\.\d+)?$/;

/** The A2A-Version a request asks for: its header, else its `A2A-Version` query parameter; undefined when neither. */
export function requestedVersion(req: { headers: Record<string, string | string[] | undefined>; query?: unknown }): string | undefined {
  const query = (req.query as Record<string, unknown> | undefined)?.['A2A-Version'];
  const header = req.headers['a2a-version'];
  const v = (Array.isArray(header) ? header[0] : header) ?? (typeof query === 'string' ? query : undefined);
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}
