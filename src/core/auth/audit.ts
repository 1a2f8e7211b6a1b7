/**
 * The audit trail: every mutation by an admin or operator (tenants, keys, agents, deposits, quotas) with actor,
 * tenant, action, target, time, status and request id. Read back by `GET /audit`, newest first, in pages.
 */
import type { Pool } from 'pg';
import { z } from 'zod';
import { PageTokenError, cursorBigint, decodePageToken, encodePageToken } from '../db/page-token';

export interface AuditEntry {
  id: string;
  at: string;
  tenant: string | null;
  actor: string;
  role: string;
  action: string;
  target: string | null;
  status: number;
  requestId: string;
}

export async function writeAudit(
  pool: Pool,
  e: { tenant: string | null; actor: string; role: string; action: string; target?: string; status: number; requestId: string },
): Promise<void> {
  await pool.query('INSERT INTO audit_log (tenant, actor, role, action, target, status, request_id) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
    e.tenant,
    e.actor,
    e.role,
    e.action,
    e.target ?? null,
    e.status,
    e.requestId,
  ]);
}

/**
 * A page of the trail, newest first. `tenant` undefined lists every tenant (admins only).
 * @throws PageTokenError for a token this function did not hand out.
 */
export async function listAudit(pool: Pool, opts: { tenant?: string; pageSize: number; pageToken?: string }): Promise<{ entries: AuditEntry[]; nextPageToken: string }> {
  const before = opts.pageToken ? decodeToken(opts.pageToken) : undefined;
  const { rows } = await pool.query(
    `SELECT * FROM audit_log WHERE ($1::text IS NULL OR tenant = $1) AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`,
    [opts.tenant ?? null, before ?? null, opts.pageSize + 1],
  );
  const page = rows.slice(0, opts.pageSize);
  const last = page.at(-1);
  return {
    entries: page.map((r) => ({
      id: String(r.id),
      at: r.at.toISOString(),
      tenant: r.tenant,
      actor: r.actor,
      role: r.role,
      action: r.action,
      target: r.target,
      status: r.status,
      requestId: r.request_id,
    })),
    nextPageToken: rows.length > opts.pageSize && last ? encodePageToken({ a: String(last.id) }) : '',
  };
}

export { PageTokenError };

const AuditCursor = z.object({ a: cursorBigint });

function decodeToken(token: string): string {
  const cursor = decodePageToken(token, AuditCursor);
  if (!cursor) throw new PageTokenError('pageToken is not one this endpoint handed out');
  return cursor.a;
}
