/**
 * The A2A request handler behind the routing front door (POST /a2a). It is the per-agent handler with the
 * routed agent, when the call starts a task; every other call (a task's follow-up message, GetTask, CancelTask,
 * SubscribeToTask, a stream reconnect) works on an existing task and never reads the agent. ListTasks lists
 * every task of the tenant, and the card is Switchboard's own.
 */
import type { Agent } from '../../core/agents/registry';
import { listTasks } from '../../core/db/task-store';
import { a2aError } from './errors';
import { AgentRequestHandler, type HandlerDeps, type SendAnswer, type TaskList, listQuery } from './request-handler';
import type { ExchangeEvent, StreamCursor } from './task-stream';
import type { Dialect } from '../../../task/wire';
import type { Caller } from '../../core/auth/caller';
import type { ListTasksQuery } from './schemas';

/**
 * Stands in for an agent on calls that have none. The base class reads its agent only to start a task (which
 * this class refuses without a routed agent), for its card and for ListTasks (both overridden here).
 */
const NO_AGENT = { id: '', name: 'Switchboard', card: { name: 'Switchboard' }, priceMinor: 0 } as Agent;

export class FrontDoorHandler extends AgentRequestHandler {
  constructor(
    private readonly routed: Agent | undefined,
    private readonly front: { caller: Caller; card: () => Promise<Record<string, unknown>> },
    rpcUrl: string,
    private readonly handlerDeps: HandlerDeps,
    private readonly cursor?: StreamCursor,
    dialect: Dialect = '1.0',
  ) {
    super(routed ?? NO_AGENT, front.caller, rpcUrl, handlerDeps, cursor, dialect);
  }

  override async card(): Promise<Record<string, unknown>> {
    return this.front.card();
  }

  // The rest of the arguments (the call's extras) go to the base class as they came.
  override async send(...args: Parameters<AgentRequestHandler['send']>): Promise<SendAnswer> {
    if (!this.routed && !args[0].message?.taskId) throw a2aError('Internal', 'a new task reached the front door without a routed agent');
    return super.send(...args);
  }

  override async *sendStream(...args: Parameters<AgentRequestHandler['sendStream']>): AsyncGenerator<ExchangeEvent, void, undefined> {
    // Without an agent the call must be a follow-up or a reconnect of a known message (the route checked it).
    if (!this.routed && !args[0].message?.taskId && this.cursor?.lastEventId === undefined) {
      throw a2aError('Internal', 'a new task reached the front door without a routed agent');
    }
    yield* super.sendStream(...args);
  }

  /** Every task of the tenant, whichever agent runs it. */
  override async list(params: ListTasksQuery): Promise<TaskList> {
    return listTasks(this.handlerDeps.pool, this.front.caller.tenant, undefined, listQuery(params));
  }
}
