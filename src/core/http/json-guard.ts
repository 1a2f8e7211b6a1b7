/**
 * The one check JSON from a peer passes before anything recursive reads it. V8's JSON.parse is iterative and takes
 * any depth, but what reads the value afterwards recurses: zod, pathOfNul, the SDK's ts-proto fromJSON, a later
 * JSON.stringify, PostgreSQL's jsonb parser ("stack depth limit exceeded" past about 15,000 levels at the default
 * max_stack_depth of 2 MB). One frame nested 20,000 deep overflowed the stack inside a WebSocket handler and
 * ended the process. So the text is checked first, in one linear pass: its nesting depth outside strings, its size
 * when the caller has no cap of its own, and its encoding when it arrives as bytes.
 *
 * Where it runs (every place peer JSON enters). To a client's depth: the app's JSON body parser (src/api/app.ts: NEXUS,
 * Genesis, agent registration, every admin route), the JSON-RPC core (src/api/a2a/rpc-handler.ts: the HTTP route, the
 * hub's agent.send_task, NEXUS, REST and gRPC after the SDK), REST bodies, NANDA action text, Genesis plaintext. To
 * an agent's: pushes, hub frames, and, as a stream meter, every body an outbound call reads (src/core/http/outbound.ts):
 * agents' answers and SSE events, cards, JWKS, token endpoints, whichever reader (the SDK's res.json() too) reads it.
 */
import { isUtf8 } from 'node:buffer';

/**
 * The deepest nesting of arrays and objects read from a client (any request, at any route or binding). A2A
 * payloads are shallow: a request's data part sits 5 levels down, which leaves the data itself 95.
 */
export const MAX_JSON_DEPTH = 100;

/**
 * The deepest nesting read from an agent (answers, SSE events, pushes, hub frames, cards). Twice a client's: an
 * answer wraps what the agent was sent (a task carries the request's message in its history, an artifact may echo
 * its data), so a request within the limit never makes its agent's answer unreadable. Still 75 times below what
 * PostgreSQL's jsonb takes (about 15,000 levels at the default max_stack_depth) and far below what any recursive
 * reader here overflows at.
 */
export const MAX_AGENT_JSON_DEPTH = 2 * MAX_JSON_DEPTH;

/** Which limit a text broke: its nesting, its size, or its encoding (not UTF-8). */
export type JsonLimit = 'depth' | 'size' | 'encoding';

/** JSON a peer sent that is not read, and why. The message says which limit, for the peer to see. */
export class JsonLimitError extends Error {
  override readonly name = 'JsonLimitError';
  constructor(
    readonly limit: JsonLimit,
    message: string,
  ) {
    super(message);
  }
}

export interface JsonLimits {
  /** Default MAX_JSON_DEPTH (a client's); MAX_AGENT_JSON_DEPTH for what agents send. */
  maxDepth?: number;
  /** Bytes (UTF-8); unset: no check here (the caller's transport caps it: Fastify's bodyLimit, ws maxPayload…). */
  maxBytes?: number;
}

const LF = 0x0a;
const CR = 0x0d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/**
 * Counts the nesting of JSON text as it streams by, chunk by chunk (UTF-8 bytes or a string: every character it
 * looks at is ASCII, and no byte of a multi-byte UTF-8 sequence is). Brackets inside strings do not count.
 *
 * A line break ends a string: no valid JSON string holds a raw one (RFC 8259 §7), so this changes nothing for
 * JSON, and in an event stream a quote in a comment or an `event:` line cannot hide the brackets of the data
 * that follows. With `perEvent`, a blank line (an SSE event's end: LF, CR or CRLF twice) starts the count again.
 */
export class JsonDepthMeter {
  private depth = 0;
  private inString = false;
  private escaped = false;
  private lineStart = true;
  private lastWasCR = false;

  constructor(
    private readonly maxDepth = MAX_JSON_DEPTH,
    private readonly perEvent = false,
  ) {}

  /** @throws JsonLimitError ('depth') as soon as the nesting passes the limit. */
  feed(chunk: string | Uint8Array): void {
    const text = typeof chunk === 'string' ? chunk : undefined;
    const bytes = chunk as Uint8Array;
    for (let i = 0; i < chunk.length; i++) {
      const c = text !== undefined ? text.charCodeAt(i) : bytes[i]!;
      if (c === LF || c === CR) {
        this.inString = false;
        this.escaped = false;
        if (!(c === LF && this.lastWasCR)) {
          if (this.perEvent && this.lineStart) this.depth = 0;
          this.lineStart = true;
        }
        this.lastWasCR = c === CR;
        continue;
      }
      this.lineStart = false;
      this.lastWasCR = false;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === BACKSLASH) this.escaped = true;
        else if (c === QUOTE) this.inString = false;
      } else if (c === QUOTE) {
        this.inString = true;
      } else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
        if (++this.depth > this.maxDepth) throw new JsonLimitError('depth', `the JSON nests arrays and objects deeper than ${this.maxDepth} levels`);
      } else if ((c === CLOSE_BRACKET || c === CLOSE_BRACE) && this.depth > 0) {
        this.depth--;
      }
    }
  }
}

/**
 * Checks JSON text from a peer, in one linear pass, and returns it as a string (bytes decoded as UTF-8).
 * @throws JsonLimitError when it is over `maxBytes`, is bytes that are not UTF-8 (RFC 8259 §8.1), or nests
 *   deeper than `maxDepth`. Whether it is JSON at all is JSON.parse's to say.
 */
export function checkJson(input: string | Uint8Array, limits: JsonLimits = {}): string {
  if (limits.maxBytes !== undefined) {
    const size = typeof input === 'string' ? Buffer.byteLength(input) : input.byteLength;
    if (size > limits.maxBytes) throw new JsonLimitError('size', `the JSON is ${size} bytes, over the limit of ${limits.maxBytes}`);
  }
  if (typeof input !== 'string' && !isUtf8(input)) throw new JsonLimitError('encoding', 'the JSON is not valid UTF-8');
  new JsonDepthMeter(limits.maxDepth).feed(input);
  return typeof input === 'string' ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength).toString('utf8');
}

/**
 * checkJson, then JSON.parse: the way to read JSON a peer sent.
 * @throws JsonLimitError (see checkJson), or SyntaxError when it is not JSON.
 */
export function parseJson(input: string | Uint8Array, limits?: JsonLimits): unknown {
  return JSON.parse(checkJson(input, limits));
}

/**
 * The path of the first string (or object key) in `value` holding U+0000, or undefined when there is none.
 * PostgreSQL cannot store U+0000 in text or jsonb, so input holding it is refused at the edge.
 */
export function pathOfNul(value: unknown, path = ''): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? path : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, child] of Object.entries(value)) {
    const at = path ? `${path}.${key}` : key;
    if (key.includes('\u0000')) return at;
    const found = pathOfNul(child, at);
    if (found !== undefined) return found;
  }
  return undefined;
}
