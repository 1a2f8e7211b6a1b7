/**
 * Switchboard's A2A endpoints, shared by every binding: one RPC core (its checks, caps and per-key stream
 * counts) and one routing front door. JSON-RPC (src/api/routes/json-rpc.ts), HTTP+JSON (src/api/routes/rest.ts) and gRPC
 * (src/api/grpc/server.ts) all answer through it, so a call behaves the same whichever binding carries it.
 */
import { FrontDoor } from './front-door';
import { type RpcCoreDeps, RpcCore, type RpcResolver } from './rpc-handler';

export class A2AEndpoints {
  readonly core: RpcCore;
  private readonly frontDoor: FrontDoor;

  constructor(private readonly deps: RpcCoreDeps) {
    this.core = new RpcCore(deps);
    this.frontDoor = new FrontDoor({ registry: deps.registry, pool: deps.pool, policies: deps.policies });
  }

  /**
   * The resolver of one endpoint: a registered agent's (`agentId`), or the routing front door (undefined), which
   * picks an agent for each new task and serves existing tasks of any agent of the tenant.
   */
  resolver(agentId: string | undefined): RpcResolver {
    return agentId === undefined ? (call) => this.frontDoor.resolve(call, this.deps) : this.core.agentEndpoint(agentId);
  }
}
