//! Writes the seed corpus of the herd's fuzz targets (`fuzz/corpus/herd_envelope`,
//! `fuzz/corpus/herd_definition`, `fuzz/corpus/herd_expand`): envelopes as a mailbox
//! holds them, definitions as people write them, and bodies with every sort of `@file`
//! line: `cargo test -p ferry-herd --test seeds -- --ignored write_fuzz_seeds`.

use std::path::Path;

use ferry_herd::envelope::{Envelope, FileItem, Kind, OWNER, worker_address};
use ferry_herd::keys::WorkerKey;

fn envelope_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let key = WorkerKey::from_hex(&"07".repeat(32)).unwrap();
    let envelope = |kind, from: &str, to: &str, text: &str| {
        let mut e = Envelope::new(kind, from.to_owned(), to.to_owned(), text.to_owned());
        e.id = "abcdefghijklmnopqrstuvwxyz".into();
        e.seq = 1;
        e.sent_at = "2026-01-02T03:04:05Z".into();
        e
    };
    let worker = worker_address("writer", 4242);
    let mut task = envelope(Kind::Task, OWNER, &worker, "Summarize the reports.");
    task.files = vec![
        FileItem {
            path: "/home/ann/notes.md".into(),
            size: 5,
            embedded: true,
            content: Some("notes".into()),
        },
        FileItem {
            path: "/home/ann/big.csv".into(),
            size: 1 << 30,
            embedded: false,
            content: None,
        },
    ];
    task.seal(&key);
    let mut completion = envelope(Kind::Completion, &worker, OWNER, "done\nü \u{202e}");
    completion.seq = u64::MAX;
    completion.result_path = Some("/home/ann/.ferry-herd/results/writer-1-x.md".into());
    completion.seal(&key);
    let mut question = envelope(Kind::Question, &worker, OWNER, "Which year?");
    question.mac = None;
    let bytes = |e: &Envelope| e.to_bytes();
    let pretty = serde_json::to_vec_pretty(&task).unwrap();
    vec![
        ("task", bytes(&task)),
        ("completion", bytes(&completion)),
        ("unsealed", bytes(&question)),
        ("pretty", pretty),
        (
            "steer_escaped",
            br#"{"version":1,"id":"aaaaaaaaaaaaaaaaaaaaaaaaaa","seq":2,"kind":"steer","from":"owner","to":"w#1","text":"\u00e9\ud83d\ude00\/","files":[],"sentAt":"x","resultPath":null}"#.to_vec(),
        ),
        (
            "bad_embedded",
            br#"{"version":1,"id":"aaaaaaaaaaaaaaaaaaaaaaaaaa","seq":2,"kind":"reply","from":"owner","to":"w#1","text":"","files":[{"path":"/a","size":9,"embedded":true,"content":"short"}],"sentAt":"x"}"#.to_vec(),
        ),
        (
            "nul",
            br#"{"version":1,"id":"aaaaaaaaaaaaaaaaaaaaaaaaaa","seq":2,"kind":"reply","from":"owner","to":"w#1","text":"a\u0000b","files":[],"sentAt":"x"}"#.to_vec(),
        ),
    ]
}

fn definition_seeds() -> Vec<(&'static str, Vec<u8>)> {
    [
        (
            "plain",
            "---\nname: worker\ndescription: Writes reports\ncommand: claude -p --system-prompt-file {systemPrompt}\n---\nYou write reports.\n",
        ),
        (
            "quoted",
            "---\nname: \"worker\"\ndescription: \"Tabs\\tand \\\"quotes\\\"\"\ncommand: \"$BIN\" run \"$X\"\naccess: read-only\n---\n@./policy.md\n",
        ),
        (
            "foreign_keys",
            "---\n# a comment\nname: worker\nmodel: opus\ntools:\n  - Read\n  - Write\ndescription: d\ncommand: c\n---\n",
        ),
        (
            "crlf",
            "---\r\nname: worker\r\ndescription: d\r\ncommand: c\r\n---\r\nbody\r\n",
        ),
        ("spread", "---\nname: worker\ndescription: d\n  more\ncommand: c\n---\n"),
        ("twice", "---\nname: worker\nname: worker\ndescription: d\ncommand: c\n---\n"),
        ("unclosed", "---\nname: worker\ndescription: d\ncommand: c\n"),
        ("no_front_matter", "name: worker\n"),
        ("bad_access", "---\nname: worker\ndescription: d\ncommand: c\naccess: root\n---\n"),
        ("json_nul", "---\nname: worker\ndescription: \"a\\u0000\"\ncommand: c\n---\n"),
        ("other_name", "---\nname: other\ndescription: d\ncommand: c\n---\n"),
        ("fence_spaces", "---  \nname: worker\ndescription: d\ncommand: c\n---\t\n"),
    ]
    .into_iter()
    .map(|(name, text)| (name, text.as_bytes().to_vec()))
    .collect()
}

/// The herd_expand seeds: a flags byte (bit 0: the caller attached notes.txt; bit 1: no
/// guidance), then the body; the names are those of the folder the target makes.
fn expand_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let seed = |flags: u8, body: &str| {
        let mut out = vec![flags];
        out.extend_from_slice(body.as_bytes());
        out
    };
    vec![
        ("one", seed(0, "Intro\n@./policy.md\nOutro\n")),
        ("crlf", seed(0, "@./notes.txt\r\nend")),
        ("skipped", seed(1, "@./notes.txt\n@./policy.md")),
        (
            "twice",
            seed(0, "@./policy.md\n@./link.md\n@./sub/../policy.md\n"),
        ),
        ("parent", seed(2, "  @../outside.md  \n")),
        ("deep", seed(0, "@./sub/deep.md\n@./empty.md\n")),
        ("not_text", seed(0, "@./latin1.txt\n")),
        ("nul", seed(0, "@./nul.txt\n")),
        ("folder", seed(0, "@./dir\n")),
        ("missing", seed(0, "@./missing.md\n")),
        ("too_large", seed(0, "@./big.md\n@./policy.md\n")),
        ("big_alone", seed(2, "@./big.md")),
        (
            "not_references",
            seed(0, "@alice\nsee @./policy.md here\n@./\n@/\n"),
        ),
        ("absolute_outside", seed(0, "@/etc/hostname\n")),
        ("empty", seed(0, "")),
    ]
}

#[test]
#[ignore = "writes the fuzz corpus; run on purpose"]
fn write_fuzz_seeds() {
    ferry_fs::fuzzing::write_corpus("herd_envelope", envelope_seeds());
    ferry_fs::fuzzing::write_corpus("herd_definition", definition_seeds());
    ferry_fs::fuzzing::write_corpus("herd_expand", expand_seeds());
}

#[test]
fn the_seeds_are_what_they_say() {
    for (name, bytes) in envelope_seeds() {
        let refused = ["bad_embedded", "nul"].contains(&name);
        assert_eq!(Envelope::parse(&bytes).is_err(), refused, "{name}");
    }
    let path = Path::new("/home/ann/.ferry-herd/agents/worker.md");
    for (name, bytes) in definition_seeds() {
        let text = std::str::from_utf8(&bytes).unwrap();
        let taken = ["plain", "quoted", "foreign_keys", "crlf", "fence_spaces"].contains(&name);
        let parsed = ferry_herd::definition::parse(text, path);
        assert_eq!(parsed.is_ok(), taken, "{name}: {parsed:?}");
    }
}
