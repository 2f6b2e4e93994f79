//! Writes the fuzz targets' seed corpus (`fuzz/corpus/<target>/`), made here from the same
//! hostile tars the rule tests build: `cargo test -p ferry-archive --test seeds -- --ignored`.

mod common;

use std::path::Path;

use common::*;

/// The archive_plan seeds: a platform byte, then an archive.
fn plan_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let good = Tar::new()
        .dir("docs/")
        .file("docs/a.txt", b"hello")
        .pax(&[("path", "long/ü/name\nx".as_bytes())])
        .file("short", b"abc")
        .long_name(b"gnu/long")
        .file("x", b"")
        .end();
    vec![
        ("good", good.clone()),
        ("good_gz", gzip(&good)),
        ("traversal", Tar::new().file("../x", b"").end()),
        ("symlink", Tar::new().typed("l", b'2').end()),
        (
            "sparse",
            Tar::new()
                .pax(&[("GNU.sparse.major", b"1")])
                .file("s", b"")
                .end(),
        ),
        ("collision", Tar::new().file("A", b"").file("a", b"").end()),
        ("reserved", Tar::new().file("con.txt", b"").end()),
        (
            "global",
            Tar::new().global(&[("comment", b"c")]).file("g", b"").end(),
        ),
        (
            "broken_pax",
            Tar::new().pax_raw(b"99 path=a\n").file("a", b"").end(),
        ),
        ("empty", vec![0u8; 1024]),
    ]
}

/// The archive_roundtrip seeds: a gzip flag byte, then 0xff-separated (flags, name) pieces.
fn roundtrip_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let tree = |gzip: u8, entries: &[(u8, &str)]| {
        let mut out = vec![gzip];
        for (flags, name) in entries {
            out.push(0xff);
            out.push(*flags);
            out.extend_from_slice(name.as_bytes());
        }
        out
    };
    let long = format!("{}/{}", "d".repeat(160), "f".repeat(150));
    vec![
        (
            "tree",
            tree(0, &[(0x80, "dir"), (3, "dir/a"), (0, "b/c/d")]),
        ),
        ("tree_gz", tree(1, &[(5, "relatório ü"), (9, "new\nline")])),
        ("long", tree(0, &[(1, long.as_str())])),
        ("collide", tree(0, &[(1, "a"), (0x80, "a")])),
    ]
}

fn write_all(dir: &Path, seeds: Vec<(&str, Vec<u8>)>, prefix: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, bytes) in seeds {
        let mut seed = prefix.to_vec();
        seed.extend(bytes);
        std::fs::write(dir.join(name), seed).unwrap();
    }
}

#[test]
#[ignore = "writes the fuzz corpus; run on purpose"]
fn write_fuzz_seeds() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    // Platform byte 0: Linux (the target picks by the byte modulo 3).
    write_all(&corpus.join("archive_plan"), plan_seeds(), &[0]);
    write_all(&corpus.join("archive_roundtrip"), roundtrip_seeds(), &[]);
}

#[test]
fn the_seeds_are_what_they_say() {
    for (name, tar) in plan_seeds() {
        let refused = ["traversal", "symlink", "sparse", "broken_pax"].contains(&name);
        assert_eq!(plan(&tar).is_err(), refused, "{name}");
    }
}
