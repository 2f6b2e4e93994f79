//! Accounts: the service user, the shared group, a group per circle and a user per
//! person, made with the shadow tools and read back through the user and group databases.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::path::Path;
use std::process::Command;

use nix::unistd::{Gid, Group, Uid, User};

use crate::HostReport;
use crate::error::{HostError, io_error};
use crate::names::{HOST_ID_MIN, SERVICE_USER, person_user};

/// A person's login shell.
const PERSON_SHELL: &str = "/bin/bash";
/// Where the shadow tools are looked for (root's PATH may lack the sbin folders).
pub(crate) const TOOL_DIRS: &[&str] = &["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The service user's uid and the service group's gid, which must exist.
pub(crate) fn service_ids() -> Result<(u32, u32), HostError> {
    let user = User::from_name(SERVICE_USER)?
        .ok_or_else(|| HostError::Conflict(format!("there is no user {SERVICE_USER:?} yet")))?;
    let group = Group::from_name(SERVICE_USER)?
        .ok_or_else(|| HostError::Conflict(format!("there is no group {SERVICE_USER:?} yet")))?;
    Ok((user.uid.as_raw(), group.gid.as_raw()))
}

/// The system user `ferry` in the group `ferry`, without a login shell.
pub(crate) fn ensure_service_user(report: &mut HostReport) -> Result<(u32, u32), HostError> {
    let gid = match Group::from_name(SERVICE_USER)? {
        Some(group) => group.gid,
        None => {
            run_tool("groupadd", &["--system", SERVICE_USER])?;
            report.note(format!("created the system group {SERVICE_USER}"));
            lookup_group(SERVICE_USER)?
        }
    };
    let user = match User::from_name(SERVICE_USER)? {
        Some(user) => user,
        None => {
            let gid_arg = gid.to_string();
            run_tool(
                "useradd",
                &[
                    "--system",
                    "--gid",
                    &gid_arg,
                    "--home-dir",
                    "/nonexistent",
                    "--no-create-home",
                    "--shell",
                    nologin_shell(),
                    "--comment",
                    "ferry service",
                    SERVICE_USER,
                ],
            )?;
            report.note(format!("created the system user {SERVICE_USER}"));
            lookup_user(SERVICE_USER)?
        }
    };
    if user.uid.is_root() {
        return Err(HostError::Conflict(format!(
            "the user {SERVICE_USER:?} has uid 0; the service must not be root"
        )));
    }
    if !group_list(&user)?.contains(&gid.as_raw()) {
        run_tool(
            "usermod",
            &["--append", "--groups", SERVICE_USER, SERVICE_USER],
        )?;
        report.note(format!("added {SERVICE_USER} to the group {SERVICE_USER}"));
    }
    Ok((user.uid.as_raw(), gid.as_raw()))
}

fn nologin_shell() -> &'static str {
    ["/usr/sbin/nologin", "/sbin/nologin"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("/bin/false")
}

/// A group with a gid of [`HOST_ID_MIN`] or above, made if missing.
pub(crate) fn ensure_group(name: &str, report: &mut HostReport) -> Result<u32, HostError> {
    if let Some(group) = Group::from_name(name)? {
        return Ok(group.gid.as_raw());
    }
    let gid = free_id(false)?;
    run_tool("groupadd", &["--gid", &gid.to_string(), name])?;
    report.note(format!("created the group {name} (gid {gid})"));
    Ok(lookup_group(name)?.as_raw())
}

/// The person's user (uid = gid of its own group, both from [`HOST_ID_MIN`]), with `home`
/// as its home and at least `groups` as supplementary groups. Returns (uid, gid).
pub(crate) fn ensure_person(
    person: &str,
    home: &Path,
    groups: &[String],
    report: &mut HostReport,
) -> Result<(u32, u32), HostError> {
    let name = person_user(person);
    let home_arg = home
        .to_str()
        .ok_or_else(|| HostError::Conflict(format!("{} is not UTF-8", home.display())))?;
    let user = match User::from_name(&name)? {
        Some(user) => user,
        None => {
            let gid = match Group::from_name(&name)? {
                Some(group) => group.gid.as_raw(),
                None => {
                    let id = free_id(true)?;
                    run_tool("groupadd", &["--gid", &id.to_string(), &name])?;
                    report.note(format!("created the group {name} (gid {id})"));
                    id
                }
            };
            let uid = if User::from_uid(Uid::from_raw(gid))?.is_none() && gid >= HOST_ID_MIN {
                gid
            } else {
                free_id(true)?
            };
            run_tool(
                "useradd",
                &[
                    "--no-log-init",
                    "--uid",
                    &uid.to_string(),
                    "--gid",
                    &gid.to_string(),
                    "--groups",
                    &groups.join(","),
                    "--home-dir",
                    home_arg,
                    "--no-create-home",
                    "--shell",
                    PERSON_SHELL,
                    "--comment",
                    &format!("ferry person {person}"),
                    &name,
                ],
            )?;
            report.note(format!("created the user {name} (uid {uid}, gid {gid})"));
            lookup_user(&name)?
        }
    };
    let (uid, gid) = (user.uid.as_raw(), user.gid.as_raw());
    if uid < HOST_ID_MIN || gid < HOST_ID_MIN {
        return Err(HostError::Conflict(format!(
            "the user {name} exists with uid {uid} and gid {gid}; a person's ids must be \
             {HOST_ID_MIN} or above (remove or renumber that user)"
        )));
    }
    match Group::from_gid(user.gid)? {
        Some(group) if group.name == name => {}
        other => {
            return Err(HostError::Conflict(format!(
                "the user {name} has primary group {}, not {name}",
                other.map_or_else(|| gid.to_string(), |g| g.name)
            )));
        }
    }
    if user.dir != home {
        run_tool("usermod", &["--home", home_arg, &name])?;
        report.note(format!(
            "set the home of {name} to {} (was {})",
            home.display(),
            user.dir.display()
        ));
    }
    let have = group_list(&user)?;
    let mut missing = Vec::new();
    for group in groups {
        if !have.contains(&lookup_group(group)?.as_raw()) {
            missing.push(group.as_str());
        }
    }
    if !missing.is_empty() {
        let list = missing.join(",");
        run_tool("usermod", &["--append", "--groups", &list, &name])?;
        report.note(format!("added {name} to {list}"));
    }
    Ok((uid, gid))
}

/// The lowest id from [`HOST_ID_MIN`] that no group uses (and, for a person, no user).
fn free_id(also_uid: bool) -> Result<u32, HostError> {
    for id in HOST_ID_MIN..u32::MAX {
        if Group::from_gid(Gid::from_raw(id))?.is_some() {
            continue;
        }
        if also_uid && User::from_uid(Uid::from_raw(id))?.is_some() {
            continue;
        }
        return Ok(id);
    }
    Err(HostError::Conflict("no free id left".to_owned()))
}

fn lookup_user(name: &str) -> Result<User, HostError> {
    User::from_name(name)?.ok_or_else(|| {
        HostError::Conflict(format!(
            "the user {name} was created but cannot be looked up"
        ))
    })
}

fn lookup_group(name: &str) -> Result<Gid, HostError> {
    Ok(Group::from_name(name)?
        .ok_or_else(|| HostError::Conflict(format!("there is no group {name}")))?
        .gid)
}

/// Every group of `user`: its primary group and its supplementary groups.
fn group_list(user: &User) -> Result<BTreeSet<u32>, HostError> {
    let name = CString::new(user.name.as_bytes())
        .map_err(|_| HostError::Conflict(format!("user name {:?} has a NUL", user.name)))?;
    Ok(nix::unistd::getgrouplist(&name, user.gid)?
        .into_iter()
        .map(Gid::as_raw)
        .collect())
}

/// Runs one shadow tool by absolute path; a non-zero exit is an error with its stderr.
fn run_tool(tool: &'static str, args: &[&str]) -> Result<(), HostError> {
    let path = TOOL_DIRS
        .iter()
        .map(|dir| Path::new(dir).join(tool))
        .find(|p| p.is_file())
        .ok_or(HostError::ToolMissing(tool))?;
    let command = format!("{tool} {}", args.join(" "));
    let output = Command::new(&path)
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .map_err(io_error(format!("running {}", path.display())))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(HostError::Tool {
            command,
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}
