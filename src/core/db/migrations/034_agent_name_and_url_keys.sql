-- Agent names unique in their tenant, and an agent URL registered once (issue 46 point 3). A client routing by
-- name (`metadata.executor.name`) must reach the agent the operator meant, not one registered first under the
-- same name or one that only looks like it: "Billing", "billing", "Billing ", "Bill<U+200B>ing" and a "Вilling"
-- with a Cyrillic В are one name. The database is the arbiter: every path (POST /agents, a hub enrollment, a hub
-- agent's agent.register, a refresh whose card renames the agent) meets the unique index below, so a race
-- between two of them ends in one holder and a unique violation the code answers with 409 (JSON-RPC -32602 on
-- the hub) naming the holder.

-- The name's comparison key: compatibility-decomposed (NFKD: fullwidth and styled letters become plain ones, and a
-- precomposed "é" equals "e" + U+0301), invisible characters removed (format characters \p{Cf}: soft hyphen,
-- zero-width space and joiners, bidi marks and isolates, BOM, tags; the default-ignorable fillers, variation
-- selectors and combining grapheme joiner; controls), Cyrillic, Greek, Armenian and a few Latin letters that look
-- like Latin ones folded to them (both cases: a database whose LC_CTYPE is plain C lowers ASCII only), lower-cased,
-- runs of white space made one space, trimmed. Latin-only look-alikes (I and l, rn and m, 0 and O) are not folded:
-- "Mail" and "Mall" are different names. Immutable: it only calls immutable built-ins on its argument.
CREATE FUNCTION switchboard_agent_name_key(name text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT btrim(regexp_replace(
    lower(translate(
      regexp_replace(normalize(name, NFKD),
        '[\u0001-\u0008\u000E-\u001F\u007F-\u0084\u0086-\u009F\u00AD\u034F\u061C\u115F\u1160\u17B4\u17B5\u180B-\u180F\u200B-\u200F\u202A-\u202E\u2060-\u206F\u3164\uFE00-\uFE0F\uFEFF\uFFA0\uFFF9-\uFFFB\u0600-\u0605\u06DD\u070F\u08E2\U000110BD\U000110CD\U00013430-\U0001343F\U0001BCA0-\U0001BCA3\U0001D173-\U0001D17A\U000E0000-\U000E0FFF]',
        '', 'g'),
      'АВЕКМНОРСТХУЅІЈԀԚԜҮҺӀаеорсухѕіјԁԛԝүһӏΑΒΕΖΗΙΚΜΝΟΡΤΥΧαιονρυϲϳıȷɑɡɩօսհո',
      'abekmhopctxysijdqwyhlaeopcyxsijdqwyhlabezhikmnoptyxaiovpucjijagiouhn')),
    '[\s\u0085\u1680\u2028\u2029]+', ' ', 'g'))
$$;

-- The agent URL's comparison key: scheme and host lower-cased, the scheme's default port dropped, a card path
-- (/.well-known/agent-card.json or agent.json) reduced to the base URL it is read from, trailing slashes and the
-- fragment dropped, an empty query dropped. The path and a query are kept as given (one server may host several
-- agents under paths or queries of its own).
CREATE FUNCTION switchboard_agent_url_key(url text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT CASE WHEN m IS NULL THEN btrim(url) ELSE
    lower(m[1]) || '://'
    || regexp_replace(lower(m[2]), CASE lower(m[1]) WHEN 'http' THEN ':(80)?$' WHEN 'https' THEN ':(443)?$' ELSE ':$' END, '')
    || rtrim(regexp_replace(m[3], '/\.well-known/agent(-card)?\.json$', ''), '/')
    || CASE WHEN coalesce(m[4], '?') = '?' THEN '' ELSE m[4] END
  END
  FROM regexp_match(btrim(url), '^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)([^?#]*)(\?[^#]*)?') AS m
$$;

-- A name no other agent of the tenant has (the agent `except` aside): `name` itself, else "name (2)", "name (3)", …
-- What an agent gets when its registration asks for no name and its card's name is taken: two agents whose cards
-- share a name ("Echo") both register, as "Echo" and "Echo (2)". A name with no visible character is "Agent".
CREATE FUNCTION switchboard_free_agent_name(p_tenant text, p_name text, p_except text DEFAULT NULL) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
  base text := CASE WHEN switchboard_agent_name_key(p_name) = '' THEN 'Agent' ELSE left(btrim(p_name), 190) END;
  candidate text := base;
  n integer := 1;
BEGIN
  WHILE EXISTS (SELECT 1 FROM agents WHERE tenant = p_tenant AND id IS DISTINCT FROM p_except
                   AND switchboard_agent_name_key(name) = switchboard_agent_name_key(candidate)) LOOP
    n := n + 1;
    candidate := base || ' (' || n || ')';
  END LOOP;
  RETURN candidate;
END
$$;

-- Names registered before this migration may already collide. The oldest agent of each colliding group keeps its
-- name; each later one is renamed to a free variant ("Billing (2)"), its id (what tasks, keys and gateway URLs
-- name) unchanged, so the unique index can be built on any database.
DO $$
DECLARE
  r record;
BEGIN
  FOR r IN
    SELECT tenant, id, name FROM (
      SELECT tenant, id, name, created_at,
             row_number() OVER (PARTITION BY tenant, switchboard_agent_name_key(name) ORDER BY created_at, id) AS nth
        FROM agents
    ) ranked
     WHERE nth > 1
     ORDER BY tenant, created_at, id
  LOOP
    UPDATE agents SET name = switchboard_free_agent_name(r.tenant, r.name, r.id), updated_at = now()
     WHERE tenant = r.tenant AND id = r.id;
    RAISE NOTICE 'agent % of tenant %: its name "%" was taken by an older agent; renamed', r.id, r.tenant, r.name;
  END LOOP;
END
$$;

CREATE UNIQUE INDEX agents_name_key ON agents (tenant, switchboard_agent_name_key(name));

-- URLs: a registration of a URL the tenant has registered already is refused (409 naming the agent), checked
-- under an advisory lock per tenant and URL key (src/core/agents/agent-names.ts). Not a unique index: agents registered
-- before this migration may share a URL, and deleting one of them here would delete what an operator made; those
-- stay until the operator removes one. This index makes the check a lookup.
CREATE INDEX agents_url_key ON agents (tenant, switchboard_agent_url_key(source_url));
