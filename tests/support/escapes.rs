//! Every way a command tries to outlive its call, as one bash script, and the scan of
//! `/proc` that finds what survived. Shared by the runner's own tests (ferry-exec) and
//! the end-to-end ones.

#![allow(dead_code)] // each test binary uses its own share

use std::path::Path;

/// Processes the script leaves running when bash exits: one per way out.
pub const ESCAPES: u32 = 6;

/// A token no other run shares: every process the script starts carries it in its
/// environment, and the escapees in their argv too.
pub fn marker() -> String {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded randomly per process; the pid and clock part it per call.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    format!("ferry-escape-{:016x}", h.finish())
}

/// Starts [`ESCAPES`] processes that leave bash's session or group (`setsid`,
/// `setsid -f`, a double fork with `setsid` in perl, in python and in bash, `nohup …&`
/// with `disown`), waits until each has written its pid into `dir` (so each really
/// ran), prints `ready`, then exits a second later, or with `outlast`, keeps bash busy in a marked
/// foreground child (one more process) until the deadline.
pub fn script(marker: &str, dir: &Path, outlast: bool) -> String {
    let d = dir.display();
    let sleeper = |n: u32| format!("echo $$ > {d}/e{n}; exec -a {marker} sleep 300");
    let mut s = format!("export ESCAPE_MARK={marker}; mkdir -p {d}; rm -f {d}/e*\n");
    s += &format!("setsid bash -c '{}' &\n", sleeper(1));
    s += &format!("setsid -f bash -c '{}'\n", sleeper(2));
    s += &format!(
        "perl -MPOSIX -e 'fork and exit; POSIX::setsid(); fork and exit; \
         open F, \">{d}/e3\"; print F $$; close F; exec {{\"sleep\"}} \"{marker}\", \"300\"'\n"
    );
    s += &format!(
        "/usr/bin/python3 -c 'import os\nif os.fork(): os._exit(0)\nos.setsid()\n\
         if os.fork(): os._exit(0)\nopen(\"{d}/e4\", \"w\").write(str(os.getpid()))\n\
         os.execvp(\"sleep\", [\"{marker}\", \"300\"])'\n"
    );
    s += &format!("( ( setsid bash -c '{}' & ) & )\n", sleeper(5));
    s += &format!("nohup bash -c '{}' >/dev/null 2>&1 & disown\n", sleeper(6));
    let all: Vec<String> = (1..=ESCAPES).map(|n| format!("[ -s {d}/e{n} ]")).collect();
    s += &format!(
        "for i in $(seq 400); do {} && break; sleep 0.025; done\necho ready\n",
        all.join(" && ")
    );
    if outlast {
        s += &format!("(exec -a {marker} sleep 300); true\n");
    } else {
        // Bash exits a second after they are all up, not at once: a watcher scanning
        // `/proc` on a loaded machine must have the time to see them run.
        s += "sleep 1\n";
    }
    s
}

/// Live processes whose command line or environment holds `marker`. A zombie has
/// neither, and is dead anyway, only not yet reaped.
pub fn survivors(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let holds = |file: &str| {
            std::fs::read(entry.path().join(file))
                .is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains(marker))
        };
        if holds("cmdline") || holds("environ") {
            found.push(pid);
        }
    }
    found
}
