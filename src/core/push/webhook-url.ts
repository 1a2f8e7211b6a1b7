/** Which webhooks Switchboard may call (§1.12 SSRF), checked when a config is stored. */
import * as dns from 'node:dns';
import { taskError } from '../../../task/errors';
import { isPrivateAddress } from '../http/address-policy';


/**
 * Refuses a webhook Switchboard must not call (§1.12 SSRF): anything but http(s), user:password in the URL
 * (it would be echoed back as part of the URL), and unless allowPrivate, a host that is or resolves to a
 * private, loopback or link-local address. The outbound client checks the address again at every connect
 * (DNS can change); this check is so that the client hears "no" now rather than a webhook that never fires.
 * @throws TaskError InvalidParams naming the reason.
 */
export async function checkWebhookUrl(raw: string, allowPrivate: boolean): Promise<void> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw taskError('InvalidParams', `webhook url is not a valid URL: ${raw}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw taskError('InvalidParams', `webhook url must be http or https, got ${url.protocol}`);
  if (url.username || url.password) throw taskError('InvalidParams', 'webhook url must not carry credentials; use authentication');
  if (allowPrivate) return;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  for (const address of await resolve(host)) {
    if (isPrivateAddress(address)) {
      throw taskError('InvalidParams', `webhook host ${host} is a private, loopback or link-local address (${address}); push webhooks must be public`);
    }
  }
}

async function resolve(host: string): Promise<string[]> {
  try {
    return (await dns.promises.lookup(host, { all: true, verbatim: true })).map((a) => a.address);
  } catch (err) {
    throw taskError('InvalidParams', `webhook host ${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}
