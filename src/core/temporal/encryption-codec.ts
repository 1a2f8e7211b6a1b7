/**
 * Temporal payload encryption (SWITCHBOARD_PAYLOAD_KEY): every workflow and activity payload, in histories,
 * queries, updates and failures, leaves Switchboard as AES-256-GCM ciphertext, so the Temporal database holds no
 * message text. The key id travels in the payload's metadata, so keys can rotate: the first key of the ring
 * encrypts, every key decrypts. Temporal UI reads tasks through POST /codec/decode (the "codec server" setting),
 * which applies the same codec for operators.
 *
 * Each payload is bound to its owner (issue 32): the tenant of the workflow it belongs to, or `system` for
 * housekeeping (schedules, sweeps, agent refresh) and anything encoded without a workflow. The owner is in the
 * metadata (`encryption-scope`) so the codec server refuses another tenant's payload without trying it, and it is
 * in the GCM additional authenticated data, so rewriting the metadata makes the payload fail to decrypt. Payloads
 * sealed before that (no scope) still decrypt: inside Switchboard as always, through the codec server for admins
 * only, since their owner is not known.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { DataConverter, Payload, PayloadCodec, SerializationContext } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { z } from 'zod';

export const ENCODING = 'binary/encrypted';
const KEY_ID = 'encryption-key-id';
/** `tenant:<id>` or `system`; absent on payloads sealed before payloads were bound to their owner. */
const SCOPE = 'encryption-scope';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export interface KeyRing {
  /** The id of the key that encrypts. */
  current: string;
  keys: ReadonlyMap<string, Buffer>;
}

/**
 * Parses `<keyId>:<base64 of 32 bytes>[,<keyId>:<base64>…]` (the first encrypts). The error never holds key material.
 * @throws Error naming the bad entry by position and id.
 */
export function parseKeyRing(spec: string, variable = 'SWITCHBOARD_PAYLOAD_KEY'): KeyRing {
  const keys = new Map<string, Buffer>();
  const entries = spec.split(',').map((e) => e.trim()).filter(Boolean);
  if (!entries.length) throw new Error(`${variable} holds no key`);
  entries.forEach((entry, i) => {
    const at = entry.indexOf(':');
    const id = at > 0 ? entry.slice(0, at) : '';
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(id)) throw new Error(`${variable} entry ${i + 1}: expected <keyId>:<base64 key>, with a key id of letters, digits, . _ -`);
    const key = Buffer.from(entry.slice(at + 1), 'base64');
    if (key.length !== 32) throw new Error(`${variable} key ${id}: must be 32 bytes, base64 (e.g. openssl rand -base64 32)`);
    if (keys.has(id)) throw new Error(`${variable}: key id ${id} appears twice`);
    keys.set(id, key);
  });
  return { current: entries[0]!.slice(0, entries[0]!.indexOf(':')), keys };
}

/** A fresh one-key ring spec, `k1:<base64>`. */
export function generateKeySpec(id = 'k1'): string {
  return `${id}:${randomBytes(32).toString('base64')}`;
}

const text = new TextEncoder();
const untext = new TextDecoder();

/** Who a payload belongs to: one tenant, or Switchboard itself (housekeeping, and anything without a workflow). */
export type PayloadOwner = { tenant: string } | 'system';

/**
 * Workflow ids that name their tenant, as `<kind>:<tenant>:…`: tasks (task/messages.ts workflowIdOf),
 * certifications (workflows/certification.ts certificationWorkflowId) and Genesis events (src/api/genesis/service.ts
 * eventWorkflowIdOf). Tenant ids hold no `:` (src/api/routes/tenants.ts). Every other workflow of Switchboard is
 * housekeeping with ids of its own (`switchboard-orphan-sweep:…`, `agent-refresh:…`): `system`.
 */
const TENANT_WORKFLOW_ID = /^(?:a2a|certification|genesis-event):([A-Za-z0-9][A-Za-z0-9_.-]{0,62}):./;

/** The tenant a workflow id belongs to, when it is one of the tenant-scoped kinds above. */
export function tenantOfWorkflowId(workflowId: string): string | undefined {
  return TENANT_WORKFLOW_ID.exec(workflowId)?.[1];
}

/**
 * The owner of a payload the SDK encodes: the tenant of the workflow the context names (an activity's payloads
 * belong to the workflow that scheduled it; a child's or a signalled workflow's to that workflow, as the SDK's
 * context says). Without a context (a schedule's memo, a call that names no workflow) it is `system`: fail
 * closed, only admins read it through the codec server.
 */
export function ownerOf(context?: SerializationContext): PayloadOwner {
  const tenant = context?.workflowId === undefined ? undefined : tenantOfWorkflowId(context.workflowId);
  return tenant === undefined ? 'system' : { tenant };
}

const scopeOf = (owner: PayloadOwner) => (owner === 'system' ? 'system' : `tenant:${owner.tenant}`);
/** The GCM additional data: the key id, and the owner when the payload has one (the legacy format has none). */
const aadOf = (keyId: string, scope: string | undefined) => Buffer.from(scope === undefined ? keyId : `${keyId}\u0000${scope}`);

/** A payload whose key is not in the ring, or whose ciphertext does not verify under it. */
export class PayloadKeyError extends Error {
  constructor(
    message: string,
    readonly keyId: string,
  ) {
    super(message);
  }
}

/** The codec server refuses a payload of another owner than the caller's tenant; nothing was decrypted. */
export class PayloadOwnerError extends Error {}

/** Who reads through the codec server: an admin reads every payload, anyone else only their tenant's. */
export type CodecReader = { admin: true } | { tenant: string };

export class EncryptionCodec implements PayloadCodec {
  constructor(private readonly ring: KeyRing) {}

  /** Seals each payload for the owner `context` names (see ownerOf). */
  async encode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    return this.seal(payloads, ownerOf(context));
  }

  /**
   * Opens payloads of any owner: the client and the worker hold every key and serve every tenant (the owner is
   * checked by the GCM tag, not against the context). Tenancy is enforced where people read: decodeFor.
   * @throws PayloadKeyError naming the key id when a payload's key is not in the ring or it does not verify.
   */
  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((p) => this.open(p));
  }

  /** Seals payloads for `owner` (the codec server's encode, in the caller's tenant). */
  async seal(payloads: Payload[], owner: PayloadOwner): Promise<Payload[]> {
    const id = this.ring.current;
    const key = this.ring.keys.get(id)!;
    const scope = scopeOf(owner);
    return payloads.map((p) => {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(aadOf(id, scope));
      const plain = temporal.api.common.v1.Payload.encode(p).finish();
      const sealed = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
      return { metadata: { encoding: text.encode(ENCODING), [KEY_ID]: text.encode(id), [SCOPE]: text.encode(scope) }, data: sealed };
    });
  }

  /**
   * The codec server's decode: every payload must be the reader's to read (its tenant's; for an admin any), checked
   * on the metadata before anything is decrypted. Plain payloads pass.
   * @throws PayloadOwnerError naming the first payload that is not the reader's; PayloadKeyError as decode.
   */
  async decodeFor(payloads: Payload[], reader: CodecReader): Promise<Payload[]> {
    if (!('admin' in reader)) {
      const own = scopeOf({ tenant: reader.tenant });
      payloads.forEach((p, i) => {
        if (!isSealed(p)) return;
        const scope = metadataText(p, SCOPE);
        if (scope === own) return;
        const whose = scope === undefined ? 'was sealed before payloads were bound to a tenant' : scope === 'system' ? "is Switchboard's own (housekeeping)" : 'belongs to another tenant';
        throw new PayloadOwnerError(`payload ${i} ${whose}: an operator decodes only payloads of tenant ${reader.tenant}; an admin key decodes any`);
      });
    }
    return payloads.map((p) => this.open(p));
  }

  private open(p: Payload): Payload {
    if (!isSealed(p)) return p;
    const id = metadataText(p, KEY_ID) ?? '';
    const key = this.ring.keys.get(id);
    if (!key) throw new PayloadKeyError(`payload encrypted with key ${id}, which SWITCHBOARD_PAYLOAD_KEY does not hold`, id);
    const data = Buffer.from(p.data ?? new Uint8Array());
    if (data.length < IV_BYTES + TAG_BYTES) throw new PayloadKeyError(`payload under key ${id} is too short to be ciphertext`, id);
    const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, IV_BYTES));
    decipher.setAAD(aadOf(id, metadataText(p, SCOPE)));
    decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
    let plain: Buffer;
    try {
      plain = Buffer.concat([decipher.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)), decipher.final()]);
    } catch {
      throw new PayloadKeyError(`payload under key ${id} does not decrypt (tampered, its owner rewritten, or another key with that id)`, id);
    }
    return temporal.api.common.v1.Payload.decode(plain) as Payload;
  }
}

const isSealed = (p: Payload) => !!p.metadata && untext.decode(p.metadata.encoding ?? new Uint8Array()) === ENCODING;
const metadataText = (p: Payload, key: string) => (p.metadata?.[key] === undefined ? undefined : untext.decode(p.metadata[key]));

/** The PayloadKeyError in `err` or its causes (the SDK may wrap what a codec throws). */
export function payloadKeyErrorIn(err: unknown): PayloadKeyError | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (e instanceof PayloadKeyError) return e;
  }
  return undefined;
}

/** A body the codec endpoint cannot read: answered 400. */
export class CodecRequestError extends Error {}

const Base64 = z.string().max(16 * 1024 * 1024).regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64');
/** Temporal's codec-server request body (also the route's documented body). */
export const CodecBody = z.strictObject({
  payloads: z.array(z.object({ metadata: z.record(z.string(), Base64).optional(), data: Base64.optional() })).max(10_000),
});

type JsonPayload = { metadata?: Record<string, string>; data?: string };

/**
 * Temporal UI's codec-server protocol (POST …/decode and …/encode): `{payloads: [{metadata: {k: base64}, data:
 * base64}]}` in, the same shape out, each payload through `apply`.
 * @throws CodecRequestError for a body of another shape; whatever `apply` throws.
 */
export async function applyCodecToJson(apply: (payloads: Payload[]) => Promise<Payload[]>, body: unknown): Promise<{ payloads: JsonPayload[] }> {
  const parsed = CodecBody.safeParse(body);
  if (!parsed.success) throw new CodecRequestError(`expected {payloads: [{metadata: {key: base64}, data: base64}]}: ${z.prettifyError(parsed.error)}`);
  const payloads: Payload[] = parsed.data.payloads.map((p) => ({
    metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
    data: Buffer.from(p.data ?? '', 'base64'),
  }));
  const out = await apply(payloads);
  return {
    payloads: out.map((p) => ({
      metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
      data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
    })),
  };
}

/** The module whose `failureConverter` encodes failures' messages and stack traces into a payload. */
export const SEALED_FAILURE_CONVERTER_PATH = require.resolve('./failure-converter');

/**
 * The data converter of a client or worker: with SWITCHBOARD_PAYLOAD_KEY's codec, every payload through it and
 * failures' messages and stack traces in a payload too (else they would stay plain in histories); without, the
 * SDK's defaults.
 */
export function dataConverterOf(codec: PayloadCodec | undefined): DataConverter | undefined {
  return codec ? { payloadCodecs: [codec], failureConverterPath: SEALED_FAILURE_CONVERTER_PATH } : undefined;
}
