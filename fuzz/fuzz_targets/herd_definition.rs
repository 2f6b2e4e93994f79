//! The herd's agent definitions (spec handoffs.md H-DEF): any text as a definition file,
//! front matter and all. A definition taken has its three fields, none empty or holding
//! NUL, a usable name that is its file's stem, and the body that follows the front
//! matter as written; written out again, it reads back the same.
#![no_main]

use std::path::Path;

use ferry_codes::Code;
use ferry_config::limits::HERD_DEFINITION_MAX_BYTES;
use ferry_herd::check_label;
use ferry_herd::definition::{Definition, parse};
use libfuzzer_sys::fuzz_target;

/// `definition` as a file holding it: every value a JSON string, then the body.
fn written(definition: &Definition) -> String {
    let json = |s: &str| serde_json::to_string(s).unwrap();
    format!(
        "---\nname: {}\ndescription: {}\ncommand: {}\naccess: {}\n---\n{}",
        json(&definition.name),
        json(&definition.description),
        json(&definition.command),
        if definition.read_only {
            "read-only"
        } else {
            "read-write"
        },
        definition.body,
    )
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("/home/ann/.ferry-herd/agents/worker.md");
    let definition = match parse(text, path) {
        Ok(definition) => definition,
        Err(e) => {
            assert_eq!(e.code, Code::BadDefinition, "{}", e.message);
            return;
        }
    };
    assert!(text.len() as u64 <= HERD_DEFINITION_MAX_BYTES && !text.contains('\0'));
    assert_eq!(definition.name, "worker");
    check_label(&definition.name).unwrap();
    for value in [&definition.description, &definition.command] {
        assert!(!value.is_empty() && !value.contains('\0'), "{value:?}");
    }
    assert_eq!(definition.path, path);
    assert!(text.ends_with(&definition.body));
    // The front matter opens the text; the body follows its closing line.
    assert!(text.starts_with("---"));
    let front = &text[..text.len() - definition.body.len()];
    assert_eq!(
        front.lines().filter(|l| l.trim_end() == "---").count() >= 2,
        true,
        "{front:?}"
    );
    assert!(front.ends_with('\n') || definition.body.is_empty());

    // Another file's stem is another name.
    assert!(parse(text, Path::new("/home/ann/.ferry-herd/agents/other.md")).is_err());

    let again = written(&definition);
    if again.len() as u64 <= HERD_DEFINITION_MAX_BYTES {
        assert_eq!(parse(&again, path).unwrap(), definition, "{again:?}");
    }
});
