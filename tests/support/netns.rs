//! A network namespace of its own for a node, reached from the test's namespace over a
//! veth pair: the node shares nothing of the network with the gateway but that link, so
//! it is as remote as a machine on a private network. Removed on drop.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A namespace and the two ends of its link.
pub struct Netns {
    /// The namespace's name.
    pub name: String,
    /// This side's address (where the gateway listens).
    pub host_ip: String,
    /// The namespace's address.
    pub node_ip: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap_or_else(|e| {
        panic!("`ip` (Debian's iproute2) is needed for the network namespace tests: {e}")
    });
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    /// Makes a namespace with a veth pair on a /30 of 10.231.0.0/16 of its own.
    pub fn create() -> Netns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // The process id keeps concurrent test binaries apart; n the namespaces of one.
        let tag = (std::process::id() % 4096) * 16 + n % 16;
        let (third, fourth) = (tag / 64 % 256, (tag % 64) * 4);
        let name = format!("fy-node-{tag}");
        let (outer, inner) = (format!("fyo{tag}"), format!("fyi{tag}"));
        let host_ip = format!("10.231.{third}.{}", fourth + 1);
        let node_ip = format!("10.231.{third}.{}", fourth + 2);
        // A namespace of an earlier run that died is taken down first.
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let _ = Command::new("ip").args(["link", "del", &outer]).output();
        ip(&["netns", "add", &name]);
        ip(&[
            "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ]);
        ip(&["link", "set", &inner, "netns", &name]);
        ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &outer]);
        ip(&["link", "set", &outer, "up"]);
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", name.as_str(), "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        inside(&["addr", "add", &format!("{node_ip}/30"), "dev", &inner]);
        inside(&["link", "set", &inner, "up"]);
        inside(&["link", "set", "lo", "up"]);
        Netns {
            name,
            host_ip,
            node_ip,
        }
    }

    /// `program ARGS…` run inside the namespace.
    pub fn command(&self, program: &std::path::Path) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.name]).arg(program);
        command
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // The veth pair goes with the namespace.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}
