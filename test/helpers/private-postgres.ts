/**
 * A PostgreSQL cluster of the test's own (initdb into a temporary directory, a free port), for drills that stop
 * and start the database: the shared server at DATABASE_URL is never touched. Runs as the `postgres` OS user
 * (PostgreSQL refuses root), with trust authentication on 127.0.0.1 only.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './process';

function binDir(): string {
  const versions = readdirSync('/usr/lib/postgresql').sort();
  if (!versions.length) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql');
  return join('/usr/lib/postgresql', versions.at(-1)!, 'bin');
}

export interface PrivatePostgres {
  url: string;
  port: number;
  /** `pg_ctl stop -m immediate`: connections cut, no shutdown checkpoint, as a crash. */
  crash(): void;
  start(): void;
  destroy(): void;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = binDir();
  const root = mkdtempSync(join(tmpdir(), 'sb-pg-'));
  chmodSync(root, 0o755);
  const data = join(root, 'data');
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  chownSync(root, uid, gid);
  const asPostgres = (cmd: string, args: string[]) =>
    execFileSync('runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args], { stdio: ['ignore', 'pipe', 'pipe'], cwd: root });
  asPostgres('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
  const port = await freePort();
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${root} -c fsync=off -c max_connections=100`;
  const start = () => asPostgres('pg_ctl', ['-D', data, '-o', options, '-l', join(root, 'log'), '-w', '-t', '30', 'start']);
  start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    crash: () => asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']),
    start,
    destroy() {
      try {
        asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        // already stopped
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}
