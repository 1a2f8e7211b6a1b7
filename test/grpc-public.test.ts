// SWITCHBOARD_PUBLIC_GRPC_URL: when clients reach the gRPC binding at another address than the base URL's host
// and SWITCHBOARD_GRPC_PORT (a port published by docker-compose, a proxy in front), the cards say that address,
// and an @a2a-js/sdk client that reads the card reaches the gateway through it. The "published port" here is a
// real TCP proxy in front of the gateway's gRPC port.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { AgentPool, startEchoAgent } from './agents';
import { type Gateway, register, startGateway } from './helpers/harness';
import { asTask, bindingFactory, send, textOfTask } from './helpers/binding-scenarios';

let gw: Gateway;
const agents = new AgentPool();
let proxy: net.Server;
let upstream = 0;
let proxied = 0;

before(async () => {
  // The proxy listens first; it forwards to the gateway's gRPC port once the gateway has one.
  proxy = net.createServer((socket) => {
    proxied++;
    const to = net.connect(upstream, '127.0.0.1');
    socket.pipe(to).pipe(socket);
    socket.on('error', () => to.destroy());
    to.on('error', () => socket.destroy());
  });
  await new Promise<void>((ok) => proxy.listen(0, '127.0.0.1', ok));
  const publicTarget = `localhost:${(proxy.address() as net.AddressInfo).port}`;
  gw = await startGateway({ grpc: true, grpcPublicTarget: publicTarget });
  upstream = Number(gw.grpc!.split(':')[1]);
});
after(async () => {
  await gw?.close();
  await agents.closeAll();
  proxy?.close();
});

test('the cards advertise the public gRPC target, and a client that reads the card reaches the gateway through it', async () => {
  const echo = await agents.add(startEchoAgent());
  const { id } = await register(gw, echo.url);
  const target = `localhost:${(proxy.address() as net.AddressInfo).port}`;
  assert.notEqual(target, gw.grpc, 'the proxy is not the port the gateway listens on');
  for (const card of [`/agents/${id}/.well-known/agent-card.json`, '/.well-known/agent-card.json']) {
    const body = (await (await fetch(`${gw.url}${card}`)).json()) as { supportedInterfaces: { url: string; protocolBinding: string }[] };
    const grpcs = body.supportedInterfaces.filter((i) => i.protocolBinding === 'GRPC');
    assert.deepEqual(grpcs.map((i) => i.url), [target], card);
  }
  const listed = (await (await fetch(`${gw.url}/agents/${id}`, { headers: { authorization: `Bearer ${gw.keys.operator}` } })).json()) as { gateway: { grpc: { target: string } } };
  assert.equal(listed.gateway.grpc.target, target);

  const client = await bindingFactory('GRPC', gw.keys.client).createFromUrl(`${gw.url}/agents/${id}/`);
  const task = asTask(await client.sendMessage(send('through the published port')));
  assert.equal(textOfTask(task), 'echo: through the published port');
  assert.ok(proxied > 0, 'the client connected through the advertised address');
});
