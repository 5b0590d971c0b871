-- Functions the filter language (`--filter 'item.path == ...'`) compiles
-- to on PostgreSQL: a value inside item_data, read the way the literal it
-- is compared with asks. `path` is a JSON array of keys ('["a","b"]' for
-- item.a.b), always a bound parameter. They read `json` (the exact text
-- dlq keeps), never failing on a value of another type: a test of the
-- wrong type is no match, as in SQLite.

-- The JSON at `path`, or NULL when it is missing.
CREATE FUNCTION dlq_json_at(j json, path text) RETURNS json
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT j #> ARRAY(SELECT json_array_elements_text(path::json)) $$;

-- A number (true and false as 1 and 0, as SQLite's json_extract gives
-- them); NULL for anything else.
CREATE FUNCTION dlq_json_number(j json, path text) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE json_typeof(v)
        WHEN 'number' THEN (v #>> '{}')::double precision
        WHEN 'boolean' THEN CASE WHEN (v #>> '{}') = 'true' THEN 1 ELSE 0 END
    END
    FROM (SELECT dlq_json_at(j, path) AS v) AS x
$$;

-- A string's text, or an object's or array's JSON text; NULL for numbers,
-- booleans, null and a missing value.
CREATE FUNCTION dlq_json_string(j json, path text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE json_typeof(v)
        WHEN 'string' THEN v #>> '{}'
        WHEN 'object' THEN v::text
        WHEN 'array' THEN v::text
    END
    FROM (SELECT dlq_json_at(j, path) AS v) AS x
$$;

-- Any value as text (a string's text, a number's digits, true/false, an
-- object's JSON); NULL for null and a missing value.
CREATE FUNCTION dlq_json_scalar(j json, path text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT dlq_json_at(j, path) #>> '{}' $$;

-- Whether a value is true as a filter's bare `item.path` means it: a
-- non-zero number, a non-empty string, true, any object or array.
CREATE FUNCTION dlq_json_truthy(v json) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE json_typeof(v)
        WHEN 'number' THEN (v #>> '{}')::double precision <> 0
        WHEN 'string' THEN (v #>> '{}') <> ''
        WHEN 'boolean' THEN (v #>> '{}') = 'true'
        WHEN 'object' THEN TRUE
        WHEN 'array' THEN TRUE
        ELSE FALSE
    END
$$;
