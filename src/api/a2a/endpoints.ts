/**
 * Switchboard's A2A endpoints, shared by every binding: one pipeline from a decoded call to its answer. JSON-RPC
 * (src/api/routes/json-rpc.ts), HTTP+JSON (src/api/routes/rest.ts), gRPC (src/api/grpc/server.ts), the hub's
 * WebSocket and MCP decode their requests, hand them to `answer`, and encode what it answers; so a call behaves
 * the same whichever binding carries it. Behind `answer`: the routing front door's NANDA actions (seed 001), seed
 * 001's kind-less message, then the one RPC core (its checks, caps and per-key stream counts).
 */
import { FrontDoor } from './front-door';
import { type Actions, answerSeedShaped } from './nanda-actions';
import { type RpcAnswer, type RpcCoreDeps, RpcCore, type RpcRequest, type RpcResolver } from './rpc-handler';

export class A2AEndpoints {
  readonly core: RpcCore;
  private readonly frontDoor: FrontDoor;

  /** @param actions the NANDA actions the routing front door answers (none: every call goes to the core). */
  constructor(
    private readonly deps: RpcCoreDeps,
    private readonly actions?: Actions,
  ) {
    this.core = new RpcCore(deps);
    this.frontDoor = new FrontDoor({ registry: deps.registry, pool: deps.pool, policies: deps.policies });
  }

  /**
   * Answers one call at an endpoint: a registered agent's (`agentId`), or the routing front door (undefined). At
   * the front door, a `message/send` or `SendMessage` whose first text part is a JSON object with an `action` is a
   * NANDA action (nanda-actions.ts; an agent's action comes back through the core as a routed task). Seed 001's
   * kind-less message, at any endpoint, goes on as 0.3's and is answered as the seed's bare message. Every other
   * call is the core's.
   */
  async answer(req: RpcRequest, agentId: string | undefined): Promise<RpcAnswer> {
    const resolve = this.resolver(agentId);
    const forward = (call: { method: string; params: unknown }) => this.core.answer({ ...req, ...call }, resolve);
    const rpc = { id: req.requestId ?? null, method: req.method, params: req.params };
    const action = agentId === undefined ? await this.actions?.answer(rpc, req, forward) : undefined;
    return action ?? (await answerSeedShaped(rpc, forward)) ?? this.core.answer(req, resolve);
  }

  /**
   * The resolver of one endpoint: a registered agent's (`agentId`), or the routing front door (undefined), which
   * picks an agent for each new task and serves existing tasks of any agent of the tenant.
   */
  resolver(agentId: string | undefined): RpcResolver {
    return agentId === undefined ? (call) => this.frontDoor.resolve(call, this.deps) : this.core.agentEndpoint(agentId);
  }
}
