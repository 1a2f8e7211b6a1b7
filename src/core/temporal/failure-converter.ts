/**
 * The failure converter of a deployment with SWITCHBOARD_PAYLOAD_KEY (issue 32): a failure's message and stack
 * trace (an agent's error text, a task's reason) move into its `encodedAttributes` payload, which the payload codec
 * encrypts like every other payload, and the history keeps only "Encoded failure". Loaded by path
 * (`failureConverterPath`): by the client and the worker, and bundled into the workflow sandbox (the
 * `.sealed-failures` workflow bundle, src/worker/worker.ts), where workflows fail their tasks. Reading is unchanged: every
 * SDK converter opens `encodedAttributes` whatever its own setting, so errors keep their messages in code.
 * Bundled: imports nothing but the SDK.
 */
import { DefaultFailureConverter } from '@temporalio/common';

export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
