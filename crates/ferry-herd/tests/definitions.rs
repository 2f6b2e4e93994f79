//! H-DEF for real: definitions parsed strictly and found by name in their places, and
//! whole-line `@file`s expanded once, in order, from the definition's own folder, as the
//! person (through a real in-process requester confined to a home), never recursively.

mod readers;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use ferry_codes::Code;
use ferry_config::limits::{HERD_DEFINITION_MAX_BYTES, HERD_PROMPT_MAX_BYTES};
use ferry_herd::HerdError;
use ferry_herd::definition::{Definition, find, parse};
use ferry_herd::expand::build_prompt;
use ferry_herd::reader::{Direct, Reader};
use readers::{Watching, as_nobody, fifo, folder, within_time, write};

const MINIMAL: &str = "---\nname: review\ndescription: Reviews a change\ncommand: pi -p\n---\n";

fn parsed(text: &str) -> Result<Definition, HerdError> {
    parse(text, Path::new("/agents/review.md"))
}

fn refused(text: &str) -> String {
    let e = parsed(text).unwrap_err();
    assert_eq!(e.code, Code::BadDefinition, "{e}");
    e.message
}

// ------------------------------------------------------------------------------ parse

#[test]
fn a_definition_has_its_front_matter_and_body() {
    let d = parsed(&format!("{MINIMAL}# Reviewer\n\nBe thorough.\n")).unwrap();
    assert_eq!(
        d,
        Definition {
            name: "review".into(),
            description: "Reviews a change".into(),
            command: "pi -p".into(),
            read_only: false,
            path: "/agents/review.md".into(),
            body: "# Reviewer\n\nBe thorough.\n".into(),
        }
    );
}

#[test]
fn values_are_trimmed_and_a_quoted_one_is_a_json_string() {
    let d = parsed(
        "---\nname:   review  \ndescription: \"Reviews: \\\"all\\\" of it\\n\"\n\
         command: \"pi --system-prompt {systemPrompt}\\t\"\n---\nbody",
    )
    .unwrap();
    assert_eq!(d.description, "Reviews: \"all\" of it\n");
    assert_eq!(d.command, "pi --system-prompt {systemPrompt}\t");
    assert_eq!(d.body, "body");
    // Only a value that is one whole JSON string is decoded: a command that starts (and
    // ends) with quoted words is taken as written.
    let d = parsed("---\nname: review\ndescription: d\ncommand: \"$BIN\" run\n---\n").unwrap();
    assert_eq!(d.command, "\"$BIN\" run");
    let d = parsed("---\nname: review\ndescription: d\ncommand: \"$B\" x \"$T\"\n---\n").unwrap();
    assert_eq!(d.command, "\"$B\" x \"$T\"");
    refused("---\nname: review\ndescription: \"a\\u0000b\"\ncommand: x\n---\n");
}

#[test]
fn access_is_read_write_unless_read_only() {
    let with = |access: &str| {
        parsed(&MINIMAL.replace(
            "command: pi -p\n",
            &format!("command: pi -p\naccess: {access}\n"),
        ))
    };
    assert!(with("read-only").unwrap().read_only);
    assert!(!with("read-write").unwrap().read_only);
    assert!(!parsed(MINIMAL).unwrap().read_only);
    for bad in ["readonly", "", "\"read-only \""] {
        assert_eq!(with(bad).unwrap_err().code, Code::BadDefinition, "{bad:?}");
    }
}

#[test]
fn other_tools_keys_are_ignored_with_what_is_indented_beneath_them() {
    let d = parsed(
        "---\r\nname: review\r\nmodel: sonnet\r\ntools:\r\n  - Read\r\n  - Grep\r\n\
         # a comment\r\n\r\ndescription: Reviews\r\ncommand: pi\r\n---\r\nbody\r\n",
    )
    .unwrap();
    assert_eq!(
        (d.description.as_str(), d.command.as_str()),
        ("Reviews", "pi")
    );
    assert_eq!(d.body, "body\r\n");
    // A value of ours spread over lines is not guessed at.
    refused("---\nname: review\ndescription: Reviews\ncommand: >\n  pi -p\n---\n");
}

#[test]
fn a_malformed_front_matter_is_a_bad_definition() {
    let cases = [
        ("no front matter", "# Reviewer\nname: review\n".to_owned()),
        ("a blank first line", format!("\n{MINIMAL}")),
        (
            "unterminated",
            "---\nname: review\ndescription: d\ncommand: c\n".to_owned(),
        ),
        (
            "a duplicate key",
            MINIMAL.replace("name: review\n", "name: review\nname: review\n"),
        ),
        (
            "an ignored key twice",
            MINIMAL.replace("---\nname", "---\nmodel: a\nmodel: b\nname"),
        ),
        (
            "a line with no colon",
            MINIMAL.replace("command: pi -p\n", "command: pi -p\njunk\n"),
        ),
        (
            "a key that is empty",
            MINIMAL.replace("command: pi -p\n", "command: pi -p\n: x\n"),
        ),
        ("a NUL", format!("{MINIMAL}body\0")),
    ];
    for (what, text) in cases {
        assert_eq!(
            parsed(&text).unwrap_err().code,
            Code::BadDefinition,
            "{what}"
        );
    }
    for key in ["name", "description", "command"] {
        let without: String = MINIMAL
            .lines()
            .filter(|l| !l.starts_with(key))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(refused(&without).contains(key), "{key}");
        let empty = MINIMAL.replace(&format!("{key}: "), &format!("{key}:\n{key}x: "));
        refused(&empty);
    }
}

#[test]
fn the_name_is_a_label_and_the_files_stem() {
    assert!(refused(&MINIMAL.replace("name: review", "name: other")).contains("other.md"));
    for bad in ["../review", "re/view", ".review", "-review"] {
        let text = MINIMAL.replace("name: review", &format!("name: {bad}"));
        let e = parse(&text, &Path::new("/agents").join(format!("{bad}.md"))).unwrap_err();
        assert_eq!(e.code, Code::BadDefinition, "{bad}");
    }
    assert_eq!(
        parse(MINIMAL, Path::new("/agents/review.txt"))
            .unwrap_err()
            .code,
        Code::BadDefinition
    );
}

/// `MINIMAL` with a body making the text exactly `len` bytes.
fn of_length(len: usize) -> String {
    format!("{MINIMAL}{}", "b".repeat(len - MINIMAL.len()))
}

#[test]
fn a_definition_is_at_most_the_limit() {
    let max = HERD_DEFINITION_MAX_BYTES as usize;
    parsed(&of_length(max - 1)).unwrap();
    parsed(&of_length(max)).unwrap();
    assert!(refused(&of_length(max + 1)).contains(&max.to_string()));
}

// ------------------------------------------------------------------------------- find

/// A project, a home and a site place, each read directly.
struct Places {
    _keep: tempfile::TempDir,
    dirs: Vec<PathBuf>,
}

impl Places {
    fn new() -> Places {
        let (keep, root) = folder();
        let dirs: Vec<PathBuf> = ["project", "home", "site"]
            .iter()
            .map(|p| root.join(p).join("agents"))
            .collect();
        Places { _keep: keep, dirs }
    }

    fn find(&self, name: &str) -> Result<Definition, HerdError> {
        self.find_with(name, &Direct)
    }

    fn find_with(&self, name: &str, reader: &dyn Reader) -> Result<Definition, HerdError> {
        let places: Vec<(PathBuf, &dyn Reader)> =
            self.dirs.iter().map(|d| (d.clone(), reader)).collect();
        find(name, &places, &[PathBuf::from("/")])
    }

    fn put(&self, place: usize, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dirs[place].join(format!("{name}.md"));
        write(&path, text);
        path
    }
}

fn named(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\ncommand: run\n---\nbody\n")
}

#[test]
fn the_first_place_holding_the_name_wins() {
    let places = Places::new();
    places.put(2, "review", named("review", "site"));
    assert_eq!(places.find("review").unwrap().description, "site");
    let home = places.put(1, "review", named("review", "home"));
    let found = places.find("review").unwrap();
    assert_eq!((found.description.as_str(), found.path), ("home", home));
    places.put(0, "review", named("review", "project"));
    assert_eq!(places.find("review").unwrap().description, "project");
}

#[test]
fn a_name_found_nowhere_is_an_unknown_agent_naming_where_it_looked() {
    let places = Places::new();
    places.put(0, "other", named("other", "x"));
    let e = places.find("review").unwrap_err();
    assert_eq!(e.code, Code::UnknownAgent);
    for dir in &places.dirs {
        assert!(e.message.contains(&dir.display().to_string()), "{e}");
    }
    assert_eq!(
        find("review", &[], &[]).unwrap_err().code,
        Code::UnknownAgent
    );
}

#[test]
fn a_name_that_is_not_one_file_name_is_refused_before_any_path_is_built() {
    let places = Places::new();
    places.put(0, "review", named("review", "x"));
    for bad in [
        "../agents/review",
        "a/b",
        "..",
        ".",
        "",
        ".hidden",
        "-x",
        "re\0view",
    ] {
        let watching = Watching::default();
        let e = places.find_with(bad, &watching).unwrap_err();
        assert_eq!(e.code, Code::InvalidRequest, "{bad:?}: {e}");
        assert!(watching.asked().is_empty(), "{bad:?} was looked for");
    }
}

/// A definition that is there but broken is told, not passed over for the next place.
#[test]
fn a_broken_definition_in_an_earlier_place_is_an_error() {
    let places = Places::new();
    places.put(2, "review", named("review", "site"));
    std::fs::create_dir_all(places.dirs[0].join("review.md")).unwrap();
    assert_eq!(places.find("review").unwrap_err().code, Code::IsDirectory);
    std::fs::remove_dir(places.dirs[0].join("review.md")).unwrap();

    fifo(&places.dirs[0].join("review.md"));
    let dirs = places.dirs.clone();
    let e = within_time(move || {
        let places: Vec<(PathBuf, &dyn Reader)> = dirs
            .iter()
            .map(|d| (d.clone(), &Direct as &dyn Reader))
            .collect();
        find("review", &places, &[PathBuf::from("/")]).unwrap_err()
    });
    assert_eq!(e.code, Code::NotAFile, "{e}");
    std::fs::remove_file(places.dirs[0].join("review.md")).unwrap();

    let secret = places.put(0, "review", named("review", "project"));
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let dirs = places.dirs.clone();
    let e = as_nobody(move || {
        let places: Vec<(PathBuf, &dyn Reader)> = dirs
            .iter()
            .map(|d| (d.clone(), &Direct as &dyn Reader))
            .collect();
        find("review", &places, &[PathBuf::from("/")]).unwrap_err()
    });
    assert_eq!(e.code, Code::PermissionDenied, "{e}");

    places.put(
        0,
        "review",
        b"---\nname: review\ndescription: caf\xe9\ncommand: x\n---\n",
    );
    assert_eq!(places.find("review").unwrap_err().code, Code::BadDefinition);
    places.put(0, "review", "no front matter");
    assert_eq!(places.find("review").unwrap_err().code, Code::BadDefinition);
}

#[test]
fn a_definition_file_is_read_only_up_to_the_limit() {
    let places = Places::new();
    let max = HERD_DEFINITION_MAX_BYTES as usize;
    let body = |len: usize| {
        let head = named("review", "d");
        format!("{head}{}", "b".repeat(len - head.len()))
    };
    places.put(0, "review", body(max));
    assert_eq!(
        places.find("review").unwrap().body.len(),
        max - named("review", "d").len() + 5
    );
    let path = places.put(0, "review", body(max + 1));
    let watching = Watching::default();
    let e = places.find_with("review", &watching).unwrap_err();
    assert_eq!(e.code, Code::BadDefinition, "{e}");
    // A huge file: read no further than one byte past the limit.
    std::fs::File::options()
        .append(true)
        .open(&path)
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    let watching = Watching::default();
    assert_eq!(
        places.find_with("review", &watching).unwrap_err().code,
        Code::BadDefinition
    );
    assert_eq!(watching.offset(&path), HERD_DEFINITION_MAX_BYTES + 1);
}

#[test]
fn a_linked_definition_is_named_by_its_target_and_must_define_the_name() {
    let places = Places::new();
    let (_keep, shared) = folder();
    write(&shared.join("review.md"), named("review", "shared"));
    write(&shared.join("common.md"), named("common", "common"));
    std::fs::create_dir_all(&places.dirs[0]).unwrap();
    symlink(shared.join("review.md"), places.dirs[0].join("review.md")).unwrap();
    symlink(shared.join("common.md"), places.dirs[0].join("alias.md")).unwrap();
    assert_eq!(
        places.find("review").unwrap().path,
        shared.join("review.md")
    );
    let e = places.find("alias").unwrap_err();
    assert_eq!(e.code, Code::BadDefinition, "{e}");
}

// ------------------------------------------------------------------------------ @file

/// A definition at `<dir>/agents/review.md` with `body`.
fn definition(dir: &Path, body: &str) -> Definition {
    let path = dir.join("agents/review.md");
    write(&path, format!("{MINIMAL}{body}"));
    parse(&format!("{MINIMAL}{body}"), &path).unwrap()
}

fn wrapped(path: &Path, text: &str) -> String {
    format!("<file path=\"{}\">\n{text}\n</file>", path.display())
}

#[test]
fn whole_line_references_are_replaced_in_order_and_the_rest_stays_literal() {
    let (_keep, dir) = folder();
    write(&dir.join("agents/style.md"), "Short sentences.\n");
    write(&dir.join("shared/policy.md"), "No secrets.");
    write(&dir.join("abs.md"), "Absolute.");
    let literal = "@alice\nUse @./style.md when needed\n@./\n@@./style.md\n@/\n@../\n";
    let body = format!(
        "# Reviewer\n{literal}  @./style.md  \n@../shared/policy.md\n@{}\nlast",
        dir.join("abs.md").display()
    );
    let d = definition(&dir, &body);
    let prompt = build_prompt(&d, &[], "", &Direct).unwrap();
    let expected = format!(
        "# Reviewer\n{literal}{}\n{}\n{}\nlast",
        wrapped(&dir.join("agents/style.md"), "Short sentences.\n"),
        wrapped(&dir.join("shared/policy.md"), "No secrets."),
        wrapped(&dir.join("abs.md"), "Absolute."),
    );
    assert_eq!(prompt.text, expected);
    assert_eq!(
        prompt.included,
        [
            dir.join("agents/style.md"),
            dir.join("shared/policy.md"),
            dir.join("abs.md")
        ]
    );
}

#[test]
fn the_guidance_follows_the_body_after_a_blank_line() {
    let (_keep, dir) = folder();
    let prompt = |body: &str, guidance: &str| {
        build_prompt(&definition(&dir, body), &[], guidance, &Direct)
            .unwrap()
            .text
    };
    assert_eq!(prompt("body\n", "guide"), "body\n\nguide");
    assert_eq!(prompt("body", "guide"), "body\n\nguide");
    assert_eq!(prompt("", "guide"), "guide");
    assert_eq!(prompt("body", ""), "body");
}

#[test]
fn references_resolve_from_the_definitions_folder_not_the_process_cwd() {
    let (_keep, dir) = folder();
    write(&dir.join("agents/here.md"), "beside the definition");
    let d = definition(&dir, "@./here.md\n");
    assert_ne!(std::env::current_dir().unwrap(), dir.join("agents"));
    let prompt = build_prompt(&d, &[], "", &Direct).unwrap();
    assert_eq!(prompt.included, [dir.join("agents/here.md")]);
    // `.//x` stays beneath the folder, never becoming the absolute `/x`.
    let d = definition(&dir, "@.//here.md\n");
    assert_eq!(
        build_prompt(&d, &[], "", &Direct).unwrap().included,
        [dir.join("agents/here.md")]
    );
}

#[test]
fn included_files_are_not_scanned_so_a_cycle_is_just_text() {
    let (_keep, dir) = folder();
    write(&dir.join("agents/a.md"), "@./b.md\n");
    write(&dir.join("agents/b.md"), "@./a.md\n");
    let d = definition(&dir, "@./a.md\n");
    let prompt = build_prompt(&d, &[], "", &Direct).unwrap();
    assert_eq!(
        prompt.text,
        format!("{}\n", wrapped(&dir.join("agents/a.md"), "@./b.md\n"))
    );
    assert_eq!(prompt.included, [dir.join("agents/a.md")]);
}

#[test]
fn the_first_body_reference_wins_and_a_callers_file_is_left_out() {
    let (_keep, dir) = folder();
    write(&dir.join("agents/a.md"), "A");
    write(&dir.join("agents/b.md"), "B");
    symlink("a.md", dir.join("agents/alias.md")).unwrap();
    let d = definition(&dir, "one\n@./a.md\ntwo\n@./alias.md\n@./b.md\nthree\n");
    let prompt = build_prompt(&d, &[], "", &Direct).unwrap();
    assert_eq!(
        prompt.text,
        format!(
            "one\n{}\ntwo\n{}\nthree\n",
            wrapped(&dir.join("agents/a.md"), "A"),
            wrapped(&dir.join("agents/b.md"), "B")
        )
    );
    let prompt = build_prompt(&d, &[dir.join("agents/a.md")], "", &Direct).unwrap();
    assert_eq!(
        prompt.text,
        format!(
            "one\ntwo\n{}\nthree\n",
            wrapped(&dir.join("agents/b.md"), "B")
        )
    );
    assert_eq!(prompt.included, [dir.join("agents/b.md")]);
}

#[test]
fn a_reference_that_cannot_be_read_is_an_error_naming_it() {
    let (_keep, dir) = folder();
    std::fs::create_dir_all(dir.join("agents/folder")).unwrap();
    symlink("gone.md", dir.join("agents/broken.md")).unwrap();
    fifo(&dir.join("agents/pipe.md"));
    for (reference, code) in [
        ("@./missing.md", Code::NotFound),
        ("@./broken.md", Code::NotFound),
        ("@./folder", Code::IsDirectory),
        ("@./pipe.md", Code::NotAFile),
        ("@/dev/zero", Code::NotAFile),
    ] {
        let d = definition(&dir, &format!("fine\n{reference}\n"));
        let e = within_time(move || build_prompt(&d, &[], "", &Direct).unwrap_err());
        assert_eq!(e.code, code, "{reference}: {e}");
        assert!(e.message.contains(&format!("{:?}", &reference[1..])), "{e}");
        assert!(e.message.contains("line 2"), "{e}");
    }
}

#[test]
fn a_reference_that_is_not_text_is_refused() {
    let (_keep, dir) = folder();
    write(&dir.join("agents/latin1.md"), b"caf\xe9");
    write(&dir.join("agents/nul.md"), b"a\0b");
    for name in ["latin1.md", "nul.md"] {
        let d = definition(&dir, &format!("@./{name}\n"));
        let e = build_prompt(&d, &[], "", &Direct).unwrap_err();
        assert_eq!(e.code, Code::NotText, "{name}: {e}");
        assert!(e.message.contains(name), "{e}");
    }
}

#[test]
fn a_prompt_is_at_most_the_limit_and_a_huge_file_is_not_read() {
    let (_keep, dir) = folder();
    let policy = dir.join("agents/policy.md");
    write(&policy, "p".repeat(1000));
    let d = definition(&dir, "@./policy.md\n");
    let base = build_prompt(&d, &[], "g", &Direct).unwrap().text.len();
    let guidance = |len: usize| "g".repeat(1 + len - base);
    for len in [HERD_PROMPT_MAX_BYTES - 1, HERD_PROMPT_MAX_BYTES] {
        let prompt = build_prompt(&d, &[], &guidance(len), &Direct).unwrap();
        assert_eq!(prompt.text.len(), len);
    }
    let watching = Watching::default();
    let e = build_prompt(&d, &[], &guidance(HERD_PROMPT_MAX_BYTES + 1), &watching).unwrap_err();
    assert_eq!(e.code, Code::TooLarge, "{e}");
    assert_eq!(watching.offset(&policy), 0);

    let huge = dir.join("agents/huge.md");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    let d = definition(&dir, "@./policy.md\n@./huge.md\n");
    let watching = Watching::default();
    let e = build_prompt(&d, &[], "", &watching).unwrap_err();
    assert_eq!(e.code, Code::TooLarge, "{e}");
    assert_eq!((watching.offset(&policy), watching.offset(&huge)), (0, 0));
}

#[test]
fn a_reference_that_grows_while_the_prompt_is_built_is_read_no_further_than_fits() {
    let (_keep, dir) = folder();
    let path = dir.join("agents/growing.md");
    write(&path, "small");
    let d = definition(&dir, "@./growing.md\n");
    /// Opens as Direct does, then makes the file grow past the limit.
    struct Growing(Watching);
    impl Reader for Growing {
        fn open(&self, path: &Path) -> Result<std::fs::File, HerdError> {
            let file = self.0.open(path)?;
            std::fs::File::options()
                .append(true)
                .open(path)
                .unwrap()
                .set_len(2 * HERD_PROMPT_MAX_BYTES as u64)
                .unwrap();
            Ok(file)
        }
    }
    let growing = Growing(Watching::default());
    let e = build_prompt(&d, &[], "", &growing).unwrap_err();
    assert_eq!(e.code, Code::TooLarge, "{e}");
    assert!(growing.0.offset(&path) <= HERD_PROMPT_MAX_BYTES as u64 + 1);
}

// ---------------------------------------------------------------- as the person, for real

/// The in-process requester of a person whose only tree is `home`, confined to it.
fn requester(home: &Path) -> ferry_exec::Requester {
    use ferry_exec::ops::{Executor, RunSettings, SandboxKind};
    use ferry_exec::{Access, Scope, Tree};
    let base = home.parent().unwrap().to_path_buf();
    let tree = Tree {
        path: home.to_path_buf(),
        writable: true,
    };
    let scope = Scope::new(
        base.clone(),
        home.to_path_buf(),
        vec![tree],
        Access::Confined,
    )
    .unwrap();
    let run = RunSettings {
        user: "ann".into(),
        full_output_dir: base.join("out"),
        sandbox: SandboxKind::None,
        network: false,
        output_ttl_secs: 60,
        output_max_bytes: 1024,
    };
    ferry_exec::Requester::InProcess(Executor::new(scope, run, None))
}

#[test]
fn as_the_person_a_reference_outside_their_trees_is_refused_and_a_link_inside_followed() {
    let (_keep, root) = folder();
    let home = root.join("home/ann");
    write(&home.join("shared/real.md"), "the real policy");
    write(&root.join("elsewhere/secret.md"), "not ann's");
    std::fs::create_dir_all(home.join(".ferry-herd/agents")).unwrap();
    symlink(
        "../../shared/real.md",
        home.join(".ferry-herd/agents/policy.md"),
    )
    .unwrap();
    symlink(
        root.join("elsewhere/secret.md"),
        home.join(".ferry-herd/agents/out.md"),
    )
    .unwrap();
    let requester = requester(&home);
    let places: Vec<(PathBuf, &dyn Reader)> = vec![(home.join(".ferry-herd/agents"), &requester)];
    write(
        &home.join(".ferry-herd/agents/review.md"),
        format!("{MINIMAL}@./policy.md\n@../../shared/real.md\n"),
    );
    let d = find("review", &places, &[PathBuf::from("/")]).unwrap();
    let prompt = build_prompt(&d, &[], "", &requester).unwrap();
    assert_eq!(prompt.included, [home.join("shared/real.md")]);
    assert_eq!(
        prompt.text,
        format!(
            "{}\n",
            wrapped(&home.join("shared/real.md"), "the real policy")
        )
    );

    for outside in [
        "@/etc/passwd",
        "@./out.md",
        "@../../../../elsewhere/secret.md",
    ] {
        write(
            &home.join(".ferry-herd/agents/review.md"),
            format!("{MINIMAL}{outside}\n"),
        );
        let d = find("review", &places, &[PathBuf::from("/")]).unwrap();
        let e = build_prompt(&d, &[], "", &requester).unwrap_err();
        assert_eq!(e.code, Code::PathEscapes, "{outside}: {e}");
        assert!(e.message.contains(&format!("{:?}", &outside[1..])), "{e}");
        assert!(!e.message.contains("not ann's"), "{e}");
    }
}

/// A definition whose real path is outside the allowed roots is refused before it is
/// read, whatever it says: a link from the home into a folder others write.
#[test]
fn a_definition_leading_out_of_its_places_is_refused_unread() {
    let places = Places::new();
    let outside = tempfile::tempdir().unwrap();
    let planted = outside.path().join("review.md");
    write(&planted, "not even a definition");
    std::fs::create_dir_all(&places.dirs[1]).unwrap();
    std::os::unix::fs::symlink(&planted, places.dirs[1].join("review.md")).unwrap();
    let home = places.dirs[1].canonicalize().unwrap();
    let dirs: Vec<(PathBuf, &dyn Reader)> = places
        .dirs
        .iter()
        .map(|d| (d.clone(), &Direct as &dyn Reader))
        .collect();
    let e = find("review", &dirs, std::slice::from_ref(&home)).unwrap_err();
    assert_eq!(e.code, Code::PathDenied, "{e}");
    // Within its place, the same file is read (and found not to be a definition).
    let e = find("review", &dirs, &[outside.path().canonicalize().unwrap()]).unwrap_err();
    assert_eq!(e.code, Code::BadDefinition, "{e}");
}
