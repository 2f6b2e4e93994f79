//! MCP tool arguments (T-MCP): any JSON as the arguments of any tool, the controller's
//! and the worker's. Arguments that fit the schema `tools/list` shows are taken (nothing
//! the schema allows is refused by the typed parse or the bounds), and arguments that are
//! taken fit the schema: no name it does not declare, every required one there, each of
//! the declared type, enum and numeric bounds. String lengths and item counts are each
//! tool's own to check and are left out.
#![no_main]

use ferry_tools::fuzzing::{WORKER_TOOL, admit, holds_not_unicode, tools};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

/// What of the schema a check holds arguments to.
#[derive(Clone, Copy)]
struct Strictness {
    /// `minLength`, `maxLength`, `minItems`, `maxItems`.
    lengths: bool,
    /// `minimum`, `maximum`.
    bounds: bool,
}

/// Whether `value` fits `schema`, for the parts of JSON Schema the tools' schemas use.
fn fits(schema: &Value, value: &Value, how: Strictness) -> bool {
    let number = |key: &str| schema.get(key).and_then(Value::as_f64);
    let count = |key: &str| schema.get(key).and_then(Value::as_u64);
    let typed = match schema.get("type").and_then(Value::as_str) {
        Some("string") => value.is_string(),
        Some("integer") => value.is_u64() || value.is_i64(),
        Some("boolean") => value.is_boolean(),
        Some("array") => value.is_array(),
        Some("object") => value.is_object(),
        Some(other) => panic!("a schema type the check does not know: {other}"),
        None => true,
    };
    if !typed {
        return false;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        return false;
    }
    match value {
        Value::String(s) if how.lengths => {
            let chars = s.chars().count() as u64;
            count("minLength").is_none_or(|min| chars >= min)
                && count("maxLength").is_none_or(|max| chars <= max)
        }
        Value::Number(n) if how.bounds => {
            // Integers compared as integers: every bound in the schemas is one.
            let x = n.as_i64().map(i128::from).or(n.as_u64().map(i128::from));
            let within = |bound: Option<f64>, ok: fn(i128, i128) -> bool| {
                bound.is_none_or(|b| x.is_some_and(|x| ok(x, b as i128)))
            };
            within(number("minimum"), |x, b| x >= b) && within(number("maximum"), |x, b| x <= b)
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            (!how.lengths
                || count("minItems").is_none_or(|min| n >= min)
                    && count("maxItems").is_none_or(|max| n <= max))
                && schema
                    .get("items")
                    .is_none_or(|inner| items.iter().all(|item| fits(inner, item, how)))
        }
        Value::Object(fields) => object_fits(schema, fields, how),
        _ => true,
    }
}

fn object_fits(schema: &Value, fields: &Map<String, Value>, how: Strictness) -> bool {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    required
        .iter()
        .all(|name| name.as_str().is_some_and(|n| fields.contains_key(n)))
        && fields
            .iter()
            .all(|(name, field)| match properties.get(name) {
                Some(inner) => fits(inner, field, how),
                None => !closed,
            })
}

/// `args` as a tool takes them: null is no arguments, and a null field is one not given.
fn given(args: &Value) -> Value {
    match args {
        Value::Null => Value::Object(Map::new()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, json)) = data.split_first() else {
        return;
    };
    let Ok(args) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let tools = tools();
    let (tool, schema) = &tools[usize::from(pick) % tools.len()];
    assert_eq!(schema["additionalProperties"], false, "{tool}");
    let taken = admit(tool, args.clone());
    let strict = Strictness {
        lengths: true,
        bounds: true,
    };
    let plain = if args.is_null() {
        Value::Object(Map::new())
    } else {
        args.clone()
    };
    if fits(schema, &plain, strict) && !holds_not_unicode(&args) {
        assert!(
            taken.is_ok(),
            "{tool} refused {args} that fits its schema: {taken:?}"
        );
    }
    if taken.is_ok() {
        let loose = Strictness {
            lengths: false,
            // The worker's own tool clamps waitSecs rather than refusing it.
            bounds: *tool != WORKER_TOOL,
        };
        assert!(fits(schema, &given(&args), loose), "{tool} took {args}");
        if *tool != WORKER_TOOL {
            assert!(
                !holds_not_unicode(&args),
                "{tool} took text that is not Unicode"
            );
        }
    }
});
