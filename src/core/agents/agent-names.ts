/**
 * Agent names and URLs, each once in a tenant (issue 46 point 3). Names are compared by their key (migration 034's
 * `switchboard_agent_name_key`: NFKD, invisible characters removed, Cyrillic/Greek look-alikes folded to Latin,
 * lower case, white space collapsed and trimmed), and a unique index on (tenant, key) is the arbiter: whichever
 * path writes a name (a registration, a hub enrollment, a hub agent's rename, a refresh) either finds the holder
 * first or meets the index, and both become the same AgentConflict naming the holder. URLs are compared by their
 * key (`switchboard_agent_url_key`) under an advisory lock per tenant and URL key, around the check and the insert.
 * The keys live in SQL only, so the code and the index can never disagree about what counts as the same.
 */
import { randomBytes } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { inTransaction } from '../db/tx';

type Db = Pool | PoolClient;

/** The unique index on (tenant, name key): a unique violation on it is a name taken in a race. */
export const NAME_INDEX = 'agents_name_key';

export interface AgentRef {
  id: string;
  name: string;
}

/** A name or URL the tenant already has: the agent that holds it is named (HTTP 409; -32602 on the hub). */
export class AgentConflict extends Error {
  readonly status = 409;
  constructor(
    readonly field: 'name' | 'url',
    readonly holder: AgentRef,
    message: string,
  ) {
    super(message);
  }
}

/** A name whose key is empty: nothing visible is left once invisible characters and white space are removed. */
export class BlankName extends Error {
  constructor(name: string) {
    super(`the name ${JSON.stringify(name)} has no visible character`);
  }
}

export function nameTaken(name: string, holder: AgentRef): AgentConflict {
  const alike = holder.name === name ? '' : ` as "${holder.name}", which compares equal (case, white space, invisible and look-alike characters are ignored)`;
  return new AgentConflict('name', holder, `the name "${name}" is taken in this tenant by agent ${holder.id}${alike}; pick another name`);
}

export function urlTaken(url: string, holder: AgentRef): AgentConflict {
  return new AgentConflict('url', holder, `${url} is registered in this tenant already, as agent ${holder.id} ("${holder.name}"); use that agent, or delete it before registering the URL again`);
}

/** True for the unique violation of the name index (23505 on agents_name_key): another write took the name first. */
export function isNameConflict(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string };
  return e?.code === '23505' && e.constraint === NAME_INDEX;
}

/**
 * The agent of the tenant, other than `except`, whose name compares equal to `name`; and the name's key.
 * A lookup of the name index.
 */
export async function nameHolder(db: Db, tenant: string, name: string, except?: string): Promise<{ key: string; holder?: AgentRef }> {
  const { rows } = await db.query<{ key: string; id: string | null; name: string | null }>(
    `SELECT k.key, a.id, a.name
       FROM (SELECT switchboard_agent_name_key($2) AS key) k
       LEFT JOIN agents a ON a.tenant = $1 AND switchboard_agent_name_key(a.name) = k.key AND a.id IS DISTINCT FROM $3
      LIMIT 1`,
    [tenant, name, except ?? null],
  );
  const row = rows[0]!;
  return { key: row.key, holder: row.id ? { id: row.id, name: row.name! } : undefined };
}

/** The agent of the tenant registered at a URL that compares equal to `url` (the oldest, if several were before 034). */
export async function urlHolder(db: Db, tenant: string, url: string): Promise<AgentRef | undefined> {
  const { rows } = await db.query<AgentRef>(
    `SELECT id, name FROM agents WHERE tenant = $1 AND switchboard_agent_url_key(source_url) = switchboard_agent_url_key($2)
      ORDER BY created_at, id LIMIT 1`,
    [tenant, url],
  );
  return rows[0];
}

/**
 * Refuses a name asked for that another agent of the tenant holds (or that has no visible character), before any
 * work is done for the registration; the index still decides at the write.
 * @throws AgentConflict naming the holder; BlankName.
 */
export async function checkNameFree(db: Db, tenant: string, name: string, except?: string): Promise<void> {
  const { key, holder } = await nameHolder(db, tenant, name, except);
  if (!key) throw new BlankName(name);
  if (holder) throw nameTaken(name, holder);
}

/**
 * Writes a new agent: in one transaction, under an advisory lock for the tenant and the URL's key, the URL must be
 * unregistered in the tenant; a name `asked` for must be free; a name not asked for (the card's) becomes a free
 * variant of itself ("Echo (2)"), chosen under a second advisory lock for the tenant and the name's key, so that
 * concurrent registrations of one card do not all pick the same variant. `insert` writes the row with the name it is
 * given. A name taken by a concurrent write (the unique index) fails an asked name and makes a default one try the
 * next variant.
 * @throws AgentConflict (field `url` or `name`) naming the holder; BlankName for an asked name with nothing visible.
 */
export async function insertUnique<T>(
  pool: Pool,
  tenant: string,
  want: { url: string; name: string; asked: boolean },
  insert: (db: PoolClient, name: string) => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await inTransaction(pool, async (db) => {
        await db.query(`SELECT pg_advisory_xact_lock(hashtext('agent-url' || chr(10) || $1 || chr(10) || switchboard_agent_url_key($2)))`, [tenant, want.url]);
        const sameUrl = await urlHolder(db, tenant, want.url);
        if (sameUrl) throw urlTaken(want.url, sameUrl);
        if (want.asked) {
          await checkNameFree(db, tenant, want.name);
          return insert(db, want.name);
        }
        // Registrations of one card name wait for each other here, so each sees the variants taken before it.
        await db.query(`SELECT pg_advisory_xact_lock(hashtext('agent-name' || chr(10) || $1 || chr(10) || switchboard_agent_name_key($2)))`, [tenant, want.name]);
        const { rows } = await db.query<{ name: string }>('SELECT switchboard_free_agent_name($1, $2) AS name', [tenant, want.name]);
        return insert(db, rows[0]!.name);
      });
    } catch (err) {
      if (!isNameConflict(err)) throw err;
      // Taken between the check and the insert. A default name looks again (the new holder is committed now).
      const { holder } = await nameHolder(pool, tenant, want.name);
      if (want.asked && holder) throw nameTaken(want.name, holder);
      if (attempt >= 5) throw err;
    }
  }
}

/** A new agent's id: its name's slug and 48 random bits, unique across tenants (ids are global for the public cards) and not worth guessing. */
export function newId(name: string): string {
  return `${slug(name)}-${randomBytes(6).toString('hex')}`;
}

export function slug(name: string): string {
  return name.toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 40) || 'agent';
}
