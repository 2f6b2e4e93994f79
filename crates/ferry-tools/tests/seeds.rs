//! Writes the seed corpus of the fuzz targets for what an MCP client sends
//! (`fuzz/corpus/tool_args`, `fuzz/corpus/mcp_clean`, `fuzz/corpus/page_token`): every
//! tool's arguments made from its own schema, messages with text that is not Unicode,
//! and page tokens: `cargo test -p ferry-tools --test seeds -- --ignored write_fuzz_seeds`.

use ferry_tools::fuzzing::{admit, page_token, tools};
use serde_json::{Map, Value, json};

/// A value that fits `schema`: every property (`full`) or the required ones only.
fn example(schema: &Value, full: bool) -> Value {
    if let Some(first) = schema.get("enum").and_then(|e| e.get(0)) {
        return first.clone();
    }
    let count = |key: &str| schema.get(key).and_then(Value::as_u64);
    match schema["type"].as_str() {
        Some("string") => json!("a".repeat(count("minLength").unwrap_or(0).max(5) as usize)),
        Some("integer") => json!(count("minimum").unwrap_or(1).max(1)),
        Some("boolean") => json!(true),
        Some("array") => {
            let n = count("minItems").unwrap_or(1).max(1);
            Value::Array((0..n).map(|_| example(&schema["items"], full)).collect())
        }
        Some("object") => {
            let required: Vec<&str> = schema["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut fields = Map::new();
            for (name, inner) in schema["properties"].as_object().unwrap() {
                if full || required.contains(&name.as_str()) {
                    fields.insert(name.clone(), example(inner, full));
                }
            }
            Value::Object(fields)
        }
        other => panic!("no example of {other:?}"),
    }
}

/// The tool_args seeds: the tool's index (as the target picks it), then the JSON.
fn tool_seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    for (i, (tool, schema)) in tools().iter().enumerate() {
        let seed = |args: &Value| {
            let mut out = vec![i as u8];
            out.extend(serde_json::to_vec(args).unwrap());
            out
        };
        let tool = tool.replace(':', "_");
        seeds.push((format!("{tool}_required"), seed(&example(schema, false))));
        seeds.push((format!("{tool}_full"), seed(&example(schema, true))));
        let mut unknown = example(schema, false);
        unknown["unknownField"] = json!(1);
        seeds.push((format!("{tool}_unknown"), seed(&unknown)));
    }
    let read = tools().iter().position(|(t, _)| *t == "file_read").unwrap() as u8;
    for (name, args) in [
        ("file_read_negative", json!({"path": "a", "startLine": -1})),
        ("file_read_float", json!({"path": "a", "lineCount": 2.5})),
        ("file_read_null", json!({"path": "a", "lineOffset": null})),
        ("file_read_surrogate", json!({"path": "a\u{fdd0}"})),
        ("file_read_no_args", Value::Null),
    ] {
        let mut out = vec![read];
        out.extend(serde_json::to_vec(&args).unwrap());
        seeds.push((name.to_owned(), out));
    }
    seeds
}

/// The mcp_clean seeds: message lines, some with text that is not Unicode.
fn clean_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let call = |text: &[u8]| {
        let mut line = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"file_write","arguments":{"path":"a.txt","content":""#.to_vec();
        line.extend_from_slice(text);
        line.extend_from_slice(b"\"}}}\n");
        line
    };
    vec![
        ("clean", call(b"hello")),
        ("lone_high", call(br"x\ud800y")),
        ("lone_low", call(br"\udc00")),
        ("pair", call(br"\ud83d\ude00")),
        ("escaped_backslash", call(br"\\ud800")),
        ("high_then_bad", call(br"\uD800\u+DC0")),
        ("high_at_end", call(br"\uDBFF")),
        ("other_escapes", call(br#"\u00e9\n\t\"\/"#)),
        ("not_utf8", call(b"caf\xe9 \xff\xfe")),
        ("cut_utf8", call(b"\xe2\x82")),
        ("replacement", call("\u{fffd}".as_bytes())),
        ("upper_u", call(br"\Ud800")),
        ("raw", b"\\u12\\".to_vec()),
    ]
}

/// The page_token seeds: the folder, 0xff, then a token or the name one is made from.
fn token_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let seed = |folder: &str, rest: &str| {
        let mut out = folder.as_bytes().to_vec();
        out.push(0xff);
        out.extend_from_slice(rest.as_bytes());
        out
    };
    vec![
        ("name", seed("/w/a", "file.txt")),
        ("token", seed("/w/a", &page_token("/w/a", "file.txt"))),
        (
            "upper",
            seed("/w/a", &page_token("/w/a", "ü name\n").to_ascii_uppercase()),
        ),
        (
            "other_folder",
            seed("/w/b", &page_token("/w/a", "file.txt")),
        ),
        (
            "node",
            seed("node:n1:/home", &page_token("node:n1:/home", "x")),
        ),
        ("not_base32", seed("/w/a", "!!")),
        ("short", seed("/w/a", "ab")),
        ("empty", seed("/", "")),
    ]
}

#[test]
#[ignore = "writes the fuzz corpus; run on purpose"]
fn write_fuzz_seeds() {
    ferry_fs::fuzzing::write_corpus("tool_args", tool_seeds());
    ferry_fs::fuzzing::write_corpus("mcp_clean", clean_seeds());
    ferry_fs::fuzzing::write_corpus("page_token", token_seeds());
}

/// Arguments made from a tool's own schema are taken: the schema and the typed
/// arguments agree on names, types and what is required.
#[test]
fn every_tool_takes_what_its_schema_describes() {
    for (tool, schema) in tools() {
        for full in [false, true] {
            let args = example(&schema, full);
            admit(tool, args.clone()).unwrap_or_else(|e| panic!("{tool} refused {args}: {e}"));
        }
        let mut unknown = example(&schema, false);
        unknown["unknownField"] = json!(1);
        assert!(
            admit(tool, unknown).is_err(),
            "{tool} took an unknown field"
        );
    }
}
