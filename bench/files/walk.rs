//! The work of `ls -lR` without the printing: every entry under a folder, each stat'ed
//! without following links, folders descended. The peer of `GET /v1/files` in
//! bench/files/run. Built with `rustc -O` by the script; it prints the entry count so the
//! two sides can be checked to have seen the same tree.

use std::path::Path;

fn walk(dir: &Path, count: &mut u64, bytes: &mut u64) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = std::fs::symlink_metadata(entry.path())?;
        *count += 1;
        *bytes += meta.len();
        if meta.is_dir() {
            walk(&entry.path(), count, bytes)?;
        }
    }
    Ok(())
}

fn main() {
    let root = std::env::args().nth(1).expect("usage: walk DIR [TIMES]");
    let times: u32 = std::env::args()
        .nth(2)
        .map_or(1, |t| t.parse().expect("TIMES is a number"));
    let mut samples = Vec::new();
    let mut count = 0;
    for _ in 0..times {
        let (mut n, mut bytes) = (0, 0);
        let started = std::time::Instant::now();
        walk(Path::new(&root), &mut n, &mut bytes).expect("the walk failed");
        samples.push(started.elapsed().as_secs_f64());
        count = n;
    }
    samples.sort_by(f64::total_cmp);
    println!("{count} {:.6}", samples[samples.len() / 2]);
}
