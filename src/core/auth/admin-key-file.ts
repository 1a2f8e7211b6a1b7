/**
 * The admin key a data folder keeps for its user (`<data dir>/admin-key`, 0600), when SWITCHBOARD_ADMIN_KEY is
 * unset. The file is the user's: a start never replaces a key that works, and says so when the key there does not
 * work with the database it finds (a checkout moved from the embedded PostgreSQL to DATABASE_URL, a key revoked).
 */
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type KeyStore, looksLikeKey } from './keys';

export interface AdminKeyFile {
  file: string;
  /**
   * - `made`: the database had no admin key and the folder none: one was made, written, and is shown once (`key`);
   * - `kept`: the file's key is one of this database's admin keys;
   * - `adopted`: the database had no admin key, so it takes the file's (its hash is stored), and the file stays;
   * - `replaced`: the file's key was revoked or expired and the database has no other admin key: a new one is
   *   written there (`key`, shown once) and `problem` says why;
   * - `refused`: the file's key does not work here and the database has other admin keys: nothing is changed and
   *   `problem` says why and what to do.
   */
  outcome: 'made' | 'kept' | 'adopted' | 'replaced' | 'refused';
  key?: string;
  problem?: string;
}

/**
 * Makes sure the data folder's admin key works with this database, without ever replacing a key that works.
 * @returns undefined when there is no file and the database already has admin keys (made elsewhere).
 */
export async function ensureAdminKey(keys: KeyStore, dataDir: string): Promise<AdminKeyFile | undefined> {
  const file = join(dataDir, 'admin-key');
  const kept = (await readFile(file, 'utf8').catch(() => '')).trim();
  const hasAdmin = await keys.hasAdminKey();
  if (!kept) {
    if (hasAdmin) return undefined;
    return { file, outcome: 'made', key: await makeKey(keys, file) };
  }
  const found = await keys.inspect(kept);
  if (found.state === 'usable' && found.role === 'admin') return { file, outcome: 'kept' };
  if (found.state === 'unknown' && !hasAdmin && looksLikeKey(kept)) {
    // A new database (no admin key yet): it takes the key the user already has, as a hash like every key.
    await keys.adopt({ key: kept, tenant: null, role: 'admin', name: `adopted from ${file}` });
    // Another process on the same folder and database may have adopted it at the same time: either way it works.
    return { file, outcome: 'adopted' };
  }
  const why =
    found.state === 'usable'
      ? `it is a ${found.role} key, not an admin key`
      : found.state === 'revoked' || found.state === 'expired'
        ? `it was ${found.state} in this database at ${found.since}`
        : looksLikeKey(kept)
          ? 'this database does not know it (it was made for another database; this one has admin keys of its own)'
          : 'it is not a Switchboard API key (sb_ and 43 characters)';
  if (!hasAdmin && (found.state === 'revoked' || found.state === 'expired')) {
    // No admin key works at all: a new one, or nobody could administer this Switchboard. Said at start, not silent.
    return { file, outcome: 'replaced', key: await makeKey(keys, file), problem: `the key that was in ${file} no longer worked: ${why}` };
  }
  return {
    file,
    outcome: 'refused',
    problem: `the key in ${file} does not work with this database: ${why}. Use an admin key of this database, set SWITCHBOARD_ADMIN_KEY, or delete the file${hasAdmin ? '' : ' (a new key is then made)'}`,
  };
}

async function makeKey(keys: KeyStore, file: string): Promise<string> {
  const { key } = await keys.create({ tenant: null, role: 'admin', name: 'embedded start' });
  await mkdir(join(file, '..'), { recursive: true });
  await writeFile(file, `${key}\n`, { mode: 0o600 });
  await chmod(file, 0o600); // writeFile's mode applies only to a new file
  return key;
}
