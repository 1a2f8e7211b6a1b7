/**
 * A stored push config rendered back to each dialect's TaskPushNotificationConfig, plus `deliveryStatus`.
 * Secrets go in and never come out: no function here includes the token, the credentials or the HMAC secret.
 */
import type { Dialect } from '../../../task/wire';
import type { DeliveryStatus, PushConfig, PushConfigPage } from './store';


/** JSON.stringify drops undefined members; this keeps the rendered objects free of them for deepEqual too. */
function compact<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

const renderStatus = (s: DeliveryStatus): DeliveryStatus => compact({ ...s });

/** 1.0 TaskPushNotificationConfig (flat) + deliveryStatus. */
export function renderV1(c: PushConfig) {
  return compact({
    id: c.id,
    taskId: c.taskId,
    url: c.url,
    authentication: c.authentication && { scheme: c.authentication.scheme },
    deliveryStatus: renderStatus(c.status),
  });
}

/** 0.3 TaskPushNotificationConfig ({taskId, pushNotificationConfig}) + deliveryStatus. */
export function renderV03(c: PushConfig) {
  return {
    taskId: c.taskId,
    pushNotificationConfig: compact({ id: c.id, url: c.url, authentication: c.authentication && { schemes: [c.authentication.scheme] } }),
    deliveryStatus: renderStatus(c.status),
  };
}

export function renderConfig(dialect: Dialect, c: PushConfig) {
  return dialect === '1.0' ? renderV1(c) : renderV03(c);
}

/** 1.0 ListTaskPushNotificationConfigsResponse; 0.3 answers a bare array (it has no paging). */
export function renderList(dialect: Dialect, page: PushConfigPage) {
  return dialect === '1.0' ? { configs: page.configs.map(renderV1), nextPageToken: page.nextPageToken } : page.configs.map(renderV03);
}
