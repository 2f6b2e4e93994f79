//! The POSIX names of host mode: the service user, the shared group, and the user of each
//! person and the group of each circle. `ferry-posix-helper` spells the service user and
//! the person prefix again, on purpose: it depends on no other crate.

/// The service user (and its group): owns `.ferry/`, may call the helper.
pub const SERVICE_USER: &str = "ferry";
/// The group every person is in; owns `shared/public` and `shared/cache/dependencies`.
pub const SHARED_GROUP: &str = "fy_shared";
/// Person `<id>` is the user `fy_person_<id>`, with a primary group of the same name.
pub const PERSON_PREFIX: &str = "fy_person_";
/// Circle `<id>` is the group `fy_circle_<id>`.
pub const CIRCLE_PREFIX: &str = "fy_circle_";
/// The first uid and gid host mode hands out; persons' ids are never below it.
pub const HOST_ID_MIN: u32 = 100_000;

/// The POSIX user of a person.
pub fn person_user(person: &str) -> String {
    format!("{PERSON_PREFIX}{person}")
}

/// The POSIX group of a circle.
pub fn circle_group(circle: &str) -> String {
    format!("{CIRCLE_PREFIX}{circle}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(person_user("ann"), "fy_person_ann");
        assert_eq!(circle_group("team"), "fy_circle_team");
    }
}
