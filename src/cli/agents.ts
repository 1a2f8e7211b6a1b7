/** `switchboard agents …`: register, list, search, show, refresh and remove the tenant's agents. */
import { type Command, InvalidArgumentError } from 'commander';
import { api, print, table } from './common';

/** What the CLI prints of an agent (the whole answer with --json). */
interface AgentView {
  id: string;
  name: string;
  status?: string;
  statusReason?: string;
  priceMinor?: number;
  gateway?: { rpc?: string };
}

export function agentsCommand(root: Command): void {
  const agents = root.command('agents').description('registered agents');
  agents
    .command('add <url>')
    .description('register an agent by its URL (its card is fetched)')
    .option('--name <name>')
    .option('--price <minor>', 'price per task in minor units', nonNegativeInteger)
    .action(async (url: string, o: { name?: string; price?: number }, cmd: Command) => {
      const agent = await api(cmd).rest<AgentView>('POST', '/agents', { url, ...(o.name ? { name: o.name } : {}), ...(o.price !== undefined ? { priceMinor: o.price } : {}) });
      print(cmd, agent, () => `${agent.id}  ${agent.name}  ${agent.gateway?.rpc ?? ''}`);
    });
  agents
    .command('ls')
    .description('list agents')
    .action(async (_o: unknown, cmd: Command) => listAgents(cmd, ''));
  agents
    .command('search <text>')
    .description('agents whose card matches the text: by meaning too when Switchboard has a model service (SWITCHBOARD_EMBEDDINGS_URL)')
    .action(async (text: string, _o: unknown, cmd: Command) => listAgents(cmd, `?q=${encodeURIComponent(text)}`));
  agents
    .command('show <id>')
    .description("an agent's registration, card and health")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const agent = await api(cmd).rest<AgentView>('GET', `/agents/${encodeURIComponent(id)}`);
      print(cmd, agent, () => JSON.stringify(agent, null, 2));
    });
  agents
    .command('refresh <id>')
    .description("read the agent's card again now and probe it (operator)")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const agent = await api(cmd).rest<AgentView>('POST', `/agents/${encodeURIComponent(id)}/refresh`);
      print(cmd, agent, () => `${agent.id}  ${agent.name}  ${agent.status ?? ''}${agent.statusReason ? `: ${agent.statusReason}` : ''}`);
    });
  agents
    .command('rm <id>')
    .description('remove an agent')
    .action(async (id: string, _o: unknown, cmd: Command) => {
      await api(cmd).rest('DELETE', `/agents/${encodeURIComponent(id)}`);
      print(cmd, { removed: id }, () => `removed ${id}`);
    });
}

async function listAgents(cmd: Command, query: string): Promise<void> {
  const page = await api(cmd).rest<{ agents: AgentView[]; ranking?: string; semantic?: string }>('GET', `/agents${query}`);
  const rows = page.agents.map((a) => [a.id, a.name, a.status ?? '', String(a.priceMinor ?? 0)]);
  // A search says how it ranked: hybrid (full text and meaning), or full text and why (no model service, or it failed).
  const ranking = page.ranking ? `\n(ranking: ${page.ranking}${page.semantic === 'on' ? '' : `; semantic ${page.semantic}`})` : '';
  print(cmd, page, () => (rows.length ? table(['ID', 'NAME', 'STATUS', 'PRICE'], rows) : '(no agents)') + ranking);
}

function nonNegativeInteger(v: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('a whole number, 0 or more');
  return n;
}
