/** An HTTP header's (or a query parameter's) first value: Node gives repeated headers as arrays. */
export function firstValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
