//! A command inherits its three standard streams and no other descriptor: not one the
//! service inherited without close-on-exec from whatever started it, which no sandbox
//! would mediate. Runs as `nobody` (see common/mod.rs), with and without Landlock.

mod common;

use std::os::fd::AsRawFd;

use common::{Site, as_nobody, inner_base};
use ferry_exec::{Sandbox, run};
use rustix::io::FdFlags;

#[test]
fn a_command_inherits_no_descriptor_of_the_service() {
    as_nobody("inner_a_command_inherits_no_descriptor_of_the_service");
}

#[test]
#[ignore = "inner half: runs as nobody, started by its outer test"]
fn inner_a_command_inherits_no_descriptor_of_the_service() {
    let Some(base) = inner_base() else { return };
    let site = Site::new(&base);
    // Outside the workspace, like the site's database.
    let secret = base.join("service.db");
    std::fs::write(&secret, "the service's secret").unwrap();
    let file = std::fs::File::open(&secret).unwrap();
    // As a careless parent would have left it: open across exec.
    rustix::io::fcntl_setfd(&file, FdFlags::empty()).unwrap();
    let fd = file.as_raw_fd();
    let read = format!("cat <&{fd}");
    let landlock = Sandbox::landlock(vec![site.root.clone()], vec![], false);
    for sandbox in [Sandbox::None, landlock] {
        let mut policy = site.policy();
        policy.sandbox = sandbox.clone();
        let out = run(&site.cmd(&read, None), &site.who(), &policy).unwrap();
        assert_ne!(out.exit_code, Some(0), "{sandbox:?}: {out:?}");
        assert!(
            out.stderr.contains("Bad file descriptor"),
            "{sandbox:?}: {out:?}"
        );
        assert!(!out.stdout.contains("secret"), "{sandbox:?}: {out:?}");
    }
    // The descriptor itself is fine: this process reads through it.
    let control = std::process::Command::new("/bin/bash")
        .args(["-c", &read])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&control.stdout),
        "the service's secret"
    );
}
