/**
 * The fairness bench's flooding tenant in a process of its own (bench/fairness.ts), so its clients' CPU is not the
 * gateway process's: `concurrency` loops of blocking SendMessage to one agent card, as one tenant's client key, until
 * the parent says stop. Reports {ok, errors, firstError} to the parent when stopped.
 */
import { SendMessageRequest } from '@a2a-js/sdk';
import { randomUUID } from 'node:crypto';
import { clientFactory } from '../test/helpers/harness';

interface Start {
  cardUrl: string;
  key: string;
  concurrency: number;
}

process.once('message', (start: Start) => {
  void flood(start);
});

async function flood({ cardUrl, key, concurrency }: Start): Promise<void> {
  const client = await clientFactory(key).createFromUrl(cardUrl, '');
  let stopping = false;
  let ok = 0;
  let errors = 0;
  let firstError: string | undefined;
  process.once('message', () => (stopping = true));
  process.send!({ ready: true });
  const loop = async () => {
    while (!stopping) {
      try {
        await client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'flood' }] } }));
        ok++;
      } catch (err) {
        errors++;
        firstError ??= String(err).slice(0, 300);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  process.send!({ ok, errors, firstError }, () => process.exit(0));
}
