/**
 * One published Genesis EVENT: delivered to each subscriber by its own activity, with the retry policy of the
 * envelope's deliveryGuarantee. at-most-once: one attempt. at-least-once and exactly-once: retried with
 * backoff until the subscriber answers 2xx, for as long as the envelope's ttl allows (a day without one).
 * Deterministic: @temporalio/workflow APIs only.
 */
import { proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { createActivities } from '../activities';
import type { GenesisEventInput } from '../task/contracts';
import { describeFailure } from './failures';

type Activities = ReturnType<typeof createActivities>;


const bookkeeping = proxyActivities<Activities>({ startToCloseTimeout: '30 seconds', retry: { initialInterval: '200 milliseconds', maximumInterval: '30 seconds' } });
const DAY_MS = 24 * 3600 * 1000;

export async function genesisEventWorkflow(input: GenesisEventInput): Promise<Record<string, string>> {
  const retried = input.guarantee !== 'at-most-once';
  // Date.now() is the workflow's deterministic clock.
  const windowMs = input.expiresAt === undefined ? DAY_MS : Math.max(1000, input.expiresAt - Date.now());
  const delivery = proxyActivities<Activities>({
    startToCloseTimeout: '30 seconds',
    ...(retried ? { scheduleToCloseTimeout: windowMs } : {}),
    retry: retried
      ? { initialInterval: input.retryInitialMs ?? 1000, backoffCoefficient: 2, maximumInterval: '1 minute' }
      : { maximumAttempts: 1 },
  });
  const outcomes: Record<string, string> = {};
  const show = () => setCurrentDetails(Object.entries(outcomes).map(([id, o]) => `- \`${id}\`: ${o}`).join('\n'));
  await Promise.all(
    input.subscriptionIds.map(async (subscriptionId) => {
      const args = { tenant: input.tenant, messageId: input.messageId, subscriptionId };
      try {
        outcomes[subscriptionId] = await delivery.deliverGenesisEvent({ ...args, guarantee: input.guarantee });
      } catch (err) {
        // A retried delivery ends unacknowledged only at the end of its window: with a ttl, the ttl (Temporal
        // stops when the next retry would start past it, or times the last one out). It is dropped as expired.
        const expired = retried && input.expiresAt !== undefined;
        const status = expired ? 'expired' : 'failed';
        const error = expired ? 'the envelope\'s ttl passed before the subscriber acknowledged it' : describeFailure(err);
        await bookkeeping.finishGenesisDelivery({ ...args, status, error });
        outcomes[subscriptionId] = status;
      }
      show();
    }),
  );
  return outcomes;
}
