/**
 * The admin nouns over the admin HTTP API (src/api/routes/tenants.ts): `tenants ls|add|show|rm` and
 * `keys ls|add|revoke` (`keys create` is `keys add`). Keys belong to a tenant: `--tenant <id>` (default `default`)
 * names it. Listings are tables with a header; `--json` prints the API's answer.
 */
import { type Command, InvalidArgumentError } from 'commander';
import { ApiError, refusalOf } from './api';
import { api, print, table } from './common';

interface TenantView {
  id: string;
  name: string;
  retention?: string | null;
  createdAt?: string;
}
interface KeyView {
  id: string;
  tenant: string | null;
  role: string;
  agentId?: string;
  name: string;
  expiresAt?: string;
  revokedAt?: string;
  createdAt?: string;
  lastUsedAt?: string;
}

const seg = encodeURIComponent;
const tenantOption = (c: Command) => c.option('--tenant <id>', 'the tenant the keys belong to', 'default');

export function tenantsCommand(root: Command): void {
  const tenants = root.command('tenants').description('tenants (admin)');
  tenants
    .command('ls')
    .description('every tenant')
    .action(async (_o: unknown, cmd: Command) => {
      const r = await api(cmd).rest<{ tenants: TenantView[] }>('GET', '/tenants');
      print(cmd, r, () => table(['ID', 'NAME', 'RETENTION', 'CREATED'], r.tenants.map((t) => [t.id, t.name, t.retention ?? '-', t.createdAt ?? ''])));
    });
  tenants
    .command('add <id>')
    .description('make a tenant')
    .option('--name <name>', "the tenant's display name (default: its id)")
    .action(async (id: string, o: { name?: string }, cmd: Command) => {
      const t = await api(cmd).rest<TenantView>('POST', '/tenants', { id, name: o.name ?? id });
      print(cmd, t, () => `added tenant ${t.id}`);
    });
  tenants
    .command('show <id>')
    .description('a tenant, its own quotas and the effective ones')
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const t = await api(cmd).rest<TenantView>('GET', `/tenants/${seg(id)}`);
      print(cmd, t, () => JSON.stringify(t, null, 2));
    });
  tenants
    .command('rm <id>')
    .description('remove a tenant (where the server can: DELETE /tenants/:id)')
    .action(async (id: string, _o: unknown, cmd: Command) => {
      try {
        await api(cmd).rest('DELETE', `/tenants/${seg(id)}`);
      } catch (err) {
        if (err instanceof ApiError && isMissingRoute(err)) {
          throw new ApiError(`DELETE /tenants/${seg(id)}: this Switchboard cannot remove tenants; revoke the tenant's keys instead (switchboard keys ls --tenant ${id}, keys revoke)`, err.status, err.body);
        }
        throw err;
      }
      print(cmd, { removed: id }, () => `removed tenant ${id}`);
    });
}

/** The server's answer for a route it does not have (`{"error":"No route DELETE /…"}`), not the API's own 404. */
function isMissingRoute(err: ApiError): boolean {
  return (err.status === 404 || err.status === 405) && /^No route /.test(refusalOf(err.body));
}

export function keysCommand(root: Command): void {
  const keys = root.command('keys').description('API keys of a tenant (admin)');
  tenantOption(keys.command('ls').description("the tenant's keys (never their secrets)")).action(async (o: { tenant: string }, cmd: Command) => {
    const r = await api(cmd).rest<{ keys: KeyView[] }>('GET', `/tenants/${seg(o.tenant)}/keys`);
    const state = (k: KeyView) => (k.revokedAt ? 'revoked' : k.expiresAt && Date.parse(k.expiresAt) <= Date.now() ? 'expired' : 'active');
    print(cmd, r, () =>
      table(
        ['ID', 'ROLE', 'NAME', 'AGENT', 'STATE', 'CREATED', 'LAST USED'],
        r.keys.map((k) => [k.id, k.role, k.name, k.agentId ?? '-', state(k), k.createdAt ?? '', k.lastUsedAt ?? '-']),
      ),
    );
  });
  for (const verb of ['add', 'create']) {
    tenantOption(keys.command(verb).description(verb === 'add' ? 'make a key; its secret is shown this once' : 'the same as keys add'))
      .requiredOption('--role <role>', 'admin, operator, client, agent or metrics (reads GET /metrics only)')
      .option('--name <name>', 'what the key is for', 'cli')
      .option('--agent <agentId>', 'for role agent: the agent it speaks for')
      .option('--expires <iso>', 'when it stops working (ISO 8601 with an offset)', isoTime)
      .action(async (o: { role: string; tenant: string; name: string; agent?: string; expires?: string }, cmd: Command) => {
        const body = { role: o.role, name: o.name, ...(o.agent ? { agentId: o.agent } : {}), ...(o.expires ? { expiresAt: o.expires } : {}) };
        const r = await api(cmd).rest<KeyView & { key: string }>('POST', `/tenants/${seg(o.tenant)}/keys`, body);
        print(cmd, r, () => `${r.id}  ${r.key}`);
      });
  }
  tenantOption(keys.command('revoke <keyId>').description('revoke a key (every process stops taking it within 2 s)')).action(
    async (keyId: string, o: { tenant: string }, cmd: Command) => {
      await api(cmd).rest('DELETE', `/tenants/${seg(o.tenant)}/keys/${seg(keyId)}`);
      print(cmd, { revoked: keyId, tenant: o.tenant }, () => `revoked ${keyId}`);
    },
  );
}

function isoTime(v: string): string {
  if (!/^\d{4}-\d\d-\d\dT/.test(v) || Number.isNaN(Date.parse(v))) throw new InvalidArgumentError('an ISO 8601 time, e.g. 2027-01-31T00:00:00Z');
  return v;
}
