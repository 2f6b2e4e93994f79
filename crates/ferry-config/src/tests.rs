//! The configuration: defaults, the file, the environment, validation, printing.
use super::*;

use std::io::Write as _;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

#[test]
fn config_defaults() {
    let c = Config::load(None, env(&[])).unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(c.site.mode, SiteMode::Local);
    assert_eq!(c.server.listen, "127.0.0.1:8080");
    assert_eq!(c.server.body_idle_timeout_secs, 30);
    assert_eq!(c.server.body_min_bytes_per_sec, 1024);
    assert_eq!(c.server.header_read_timeout_secs, 30);
    assert_eq!(c.media.max_upload_bytes, 10 * 1024 * 1024);
    assert_eq!(c.media.allowed_extensions.len(), 19);
    assert!(c.media.allowed_extensions.iter().any(|e| e == "pptx"));
    assert_eq!(c.deliveries.max_bytes, 64 * 1024 * 1024);
    assert_eq!(c.deliveries.timeout_secs, 60);
    assert_eq!(c.server.max_event_streams, 16);
    assert_eq!(c.agent.max_reply_bytes, 1024 * 1024);
    assert_eq!(c.agent.max_context_bytes, 4 * 1024 * 1024);
    assert_eq!(c.exec.sandbox, SandboxChoice::Auto);
    assert_eq!(c.exec.output_ttl_hours, 24);
    assert_eq!(c.limits.person_max_bytes, 10 * 1024 * 1024 * 1024);
    assert_eq!(c.agent_ids("alice"), None);
}

#[test]
fn config_file_parsing() {
    let f = file(
        r#"
[site]
mode = "container"
agent_uid = 1000
agent_gid = 1001
[site.agents.bob]
uid = 2000
gid = 2001

[server]
listen = "0.0.0.0:9000"

[media]
max_upload_bytes = 4096
allowed_extensions = ["txt"]
"#,
    );
    let c = Config::load(Some(f.path()), env(&[])).unwrap();
    assert_eq!(c.site.mode, SiteMode::Container);
    assert_eq!(c.server.listen, "0.0.0.0:9000");
    assert_eq!(c.server.header_read_timeout_secs, 30);
    assert_eq!(c.media.max_upload_bytes, 4096);
    assert_eq!(c.media.allowed_extensions, vec!["txt".to_owned()]);
    assert_eq!(c.deliveries, DeliveriesConfig::default());
    assert_eq!(c.agent_ids("alice"), Some((1000, 1001)));
    assert_eq!(c.agent_ids("bob"), Some((2000, 2001)));
}

#[test]
fn config_missing_explicit_file_is_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.toml");
    let err = Config::load(Some(&path), env(&[])).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err}");
    assert!(err.to_string().contains("nope.toml"), "{err}");
}

#[test]
fn config_env_overrides_file() {
    let f = file("[media]\nmax_upload_bytes = 4096\n[server]\nlisten = \"0.0.0.0:1\"\n");
    let c = Config::load(
        Some(f.path()),
        env(&[
            ("FERRY_MEDIA__MAX_UPLOAD_BYTES", "2048"),
            ("FERRY_SERVER__LISTEN", "[::1]:7000"),
        ]),
    )
    .unwrap();
    assert_eq!(c.media.max_upload_bytes, 2048);
    assert_eq!(c.server.listen, "[::1]:7000");
}

#[test]
fn config_env_arrays_numbers_and_enums() {
    let c = Config::load(
        None,
        env(&[
            ("FERRY_MEDIA__ALLOWED_EXTENSIONS", r#"["txt","pdf"]"#),
            ("FERRY_DELIVERIES__TIMEOUT_SECS", "5"),
            ("FERRY_SITE__MODE", "container"),
            ("FERRY_SITE__AGENT_UID", "10"),
            ("FERRY_SITE__AGENT_GID", "11"),
            ("FERRY_SITE__AGENTS", "{ carol = { uid = 12, gid = 13 } }"),
        ]),
    )
    .unwrap();
    assert_eq!(c.media.allowed_extensions, vec!["txt", "pdf"]);
    assert_eq!(c.deliveries.timeout_secs, 5);
    assert_eq!(c.site.mode, SiteMode::Container);
    assert_eq!(c.agent_ids("dave"), Some((10, 11)));
    assert_eq!(c.agent_ids("carol"), Some((12, 13)));
}

#[test]
fn config_env_number_like_string_stays_a_string() {
    let c = Config::load(None, env(&[("FERRY_SERVER__LISTEN", "8080")])).unwrap();
    assert_eq!(c.server.listen, "8080");
}

#[test]
fn config_env_wrong_type_names_variable() {
    let err = Config::load(None, env(&[("FERRY_MEDIA__MAX_UPLOAD_BYTES", "lots")])).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("FERRY_MEDIA__MAX_UPLOAD_BYTES"), "{msg}");
    assert!(msg.contains("media.max_upload_bytes"), "{msg}");
}

#[test]
fn config_unknown_file_key_is_error() {
    let f = file("[media]\nmax_upload_byte = 1\n");
    let err = Config::load(Some(f.path()), env(&[])).unwrap_err();
    assert!(matches!(err, ConfigError::File { .. }), "{err}");
    assert!(err.to_string().contains("max_upload_byte"), "{err}");

    let f = file("[medias]\nmax_upload_bytes = 1\n");
    let err = Config::load(Some(f.path()), env(&[])).unwrap_err();
    assert!(err.to_string().contains("medias"), "{err}");
}

#[test]
fn config_unknown_env_key_is_error() {
    let err = Config::load(None, env(&[("FERRY_MEDIA__MAX_UPLOAD", "1")])).unwrap_err();
    assert!(matches!(err, ConfigError::Env { .. }), "{err}");
    assert!(err.to_string().contains("FERRY_MEDIA__MAX_UPLOAD"), "{err}");

    let err = Config::load(None, env(&[("FERRY_MEDIUM__MAX_UPLOAD_BYTES", "1")])).unwrap_err();
    assert!(
        err.to_string().contains("FERRY_MEDIUM__MAX_UPLOAD_BYTES"),
        "{err}"
    );
}

#[test]
fn config_non_override_ferry_vars_ignored() {
    let c = Config::load(
        None,
        env(&[
            ("FERRY_DATA", "/var/lib/ferry"),
            ("FERRY_CONFIG", "/etc/ferry.toml"),
            ("FERRY___X", "1"),
            ("PATH", "/bin"),
        ]),
    )
    .unwrap();
    assert_eq!(c, Config::default());
}

#[test]
fn config_container_requires_ids() {
    let err = Config::load(None, env(&[("FERRY_SITE__MODE", "container")])).unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::Invalid {
                key: "site.agent_uid",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("FERRY_SITE__AGENT_UID"), "{err}");

    let err = Config::load(
        None,
        env(&[
            ("FERRY_SITE__MODE", "container"),
            ("FERRY_SITE__AGENT_UID", "1"),
        ]),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::Invalid {
                key: "site.agent_gid",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn config_validation_limits() {
    for (var, value) in [
        ("FERRY_MEDIA__MAX_UPLOAD_BYTES", "0"),
        ("FERRY_DELIVERIES__MAX_BYTES", "0"),
        ("FERRY_DELIVERIES__TIMEOUT_SECS", "0"),
        ("FERRY_AGENT__MAX_CONTEXT_BYTES", "0"),
        ("FERRY_MEDIA__ALLOWED_EXTENSIONS", "[]"),
        ("FERRY_MEDIA__ALLOWED_EXTENSIONS", r#"["PDF"]"#),
        ("FERRY_MEDIA__ALLOWED_EXTENSIONS", r#"[".pdf"]"#),
        ("FERRY_MEDIA__ALLOWED_EXTENSIONS", r#"[""]"#),
    ] {
        let err = Config::load(None, env(&[(var, value)])).unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { .. }),
            "{var}={value}: {err}"
        );
        assert!(err.to_string().contains(var), "{err}");
    }
}

#[test]
fn the_shutdown_grace_is_0_to_an_hour() {
    assert_eq!(Config::default().server.shutdown_grace_secs, 30);
    for ok in ["0", "3599", "3600"] {
        let c = Config::load(None, env(&[("FERRY_SERVER__SHUTDOWN_GRACE_SECS", ok)])).unwrap();
        assert_eq!(c.server.shutdown_grace_secs.to_string(), ok);
    }
    let err =
        Config::load(None, env(&[("FERRY_SERVER__SHUTDOWN_GRACE_SECS", "3601")])).unwrap_err();
    assert!(matches!(err, ConfigError::Invalid { .. }), "{err}");
    assert!(err.to_string().contains("at most 3600"), "{err}");
}

#[test]
fn max_connections_is_1_to_its_ceiling() {
    assert_eq!(Config::default().server.max_connections, 10_000);
    for ok in ["1", "5000", "1000000"] {
        let c = Config::load(None, env(&[("FERRY_SERVER__MAX_CONNECTIONS", ok)])).unwrap();
        assert_eq!(c.server.max_connections.to_string(), ok);
    }
    for bad in ["0", "1000001"] {
        let err = Config::load(None, env(&[("FERRY_SERVER__MAX_CONNECTIONS", bad)])).unwrap_err();
        assert!(matches!(err, ConfigError::Invalid { .. }), "{bad}: {err}");
        assert!(err.to_string().contains("server.max_connections"), "{err}");
    }
}

#[test]
fn config_agent_ids_only_in_container_mode() {
    let mut c = Config::default();
    c.site.agent_uid = Some(1);
    c.site.agent_gid = Some(2);
    assert_eq!(c.agent_ids("a"), None);
    c.site.mode = SiteMode::Host;
    assert_eq!(c.agent_ids("a"), None);
    c.site.mode = SiteMode::Container;
    assert_eq!(c.agent_ids("a"), Some((1, 2)));
}

#[test]
fn config_print_round_trips() {
    let mut c = Config::default();
    let printed = c.to_toml_string();
    assert_eq!(toml::from_str::<Config>(&printed).unwrap(), c);

    c.site.mode = SiteMode::Container;
    c.site.agent_uid = Some(1000);
    c.site.agent_gid = Some(1000);
    c.site
        .agents
        .insert("bob".into(), AgentIds { uid: 5, gid: 6 });
    c.server.listen = "0.0.0.0:80".into();
    c.media.allowed_extensions = vec!["txt".into()];
    let printed = c.to_toml_string();
    assert!(printed.contains("mode = \"container\""), "{printed}");
    let f = file(&printed);
    assert_eq!(Config::load(Some(f.path()), env(&[])).unwrap(), c);
}

#[test]
fn config_helper_path_defaults_and_overrides() {
    let mut config = Config::default();
    assert_eq!(
        config.helper_path(),
        std::path::Path::new(DEFAULT_HELPER_PATH)
    );
    config.site.helper_path = Some("/opt/ferry/helper".into());
    assert_eq!(
        config.helper_path(),
        std::path::Path::new("/opt/ferry/helper")
    );
}

#[test]
fn config_media_ttl_hours_defaults_overrides_and_refuses_zero() {
    assert_eq!(Config::default().media.ttl_hours, 168);
    let c = Config::load(None, env(&[("FERRY_MEDIA__TTL_HOURS", "1")])).unwrap();
    assert_eq!(c.media.ttl_hours, 1);
    let err = Config::load(None, env(&[("FERRY_MEDIA__TTL_HOURS", "0")])).unwrap_err();
    assert!(err.to_string().contains("media.ttl_hours"), "{err}");
}

#[test]
fn secrets_are_printed_redacted_and_handed_on_whole() {
    let mut c = Config::default();
    c.metadata.url = Some("postgres://ferry:in-url-pw@db/ferry".into());
    c.metadata.password = Some("env-pw".into());
    c.media.backend = crate::MediaBackend::S3;
    c.media.endpoint = Some("http://127.0.0.1:3900".into());
    c.media.bucket = Some("ferry-media".into());
    c.media.access_key_id = Some("GKkeyid".into());
    c.media.secret_access_key = Some("s3-secret".into());
    c.validate().unwrap();
    let printed = c.to_toml_string();
    for secret in ["in-url-pw", "env-pw", "GKkeyid", "s3-secret"] {
        assert!(!printed.contains(secret), "{secret}: {printed}");
    }
    // A supervisor the service starts gets the configuration it runs with, whole.
    let handed = Config::from_effective_toml(&c.to_effective_toml()).unwrap();
    assert_eq!(handed, c);
}

#[test]
fn per_person_rates_default_generous_and_take_0_to_their_ceiling() {
    let c = Config::default();
    assert_eq!(c.limits.uploads_per_minute, limits::UPLOADS_PER_MINUTE);
    assert_eq!(
        c.limits.deliveries_per_minute,
        limits::DELIVERIES_PER_MINUTE
    );
    assert_eq!(
        c.limits.tool_calls_per_minute,
        limits::TOOL_CALLS_PER_MINUTE
    );
    // Generous: a person working by hand or a model's turns never come near them.
    assert!(c.limits.uploads_per_minute >= 600);
    assert!(c.limits.deliveries_per_minute >= 60);
    assert!(c.limits.tool_calls_per_minute >= 600);
    let ceiling = limits::RATE_PER_MINUTE_MAX;
    assert_eq!(ceiling, 60_000);
    for (var, key) in [
        (
            "FERRY_LIMITS__UPLOADS_PER_MINUTE",
            "limits.uploads_per_minute",
        ),
        (
            "FERRY_LIMITS__DELIVERIES_PER_MINUTE",
            "limits.deliveries_per_minute",
        ),
        (
            "FERRY_LIMITS__TOOL_CALLS_PER_MINUTE",
            "limits.tool_calls_per_minute",
        ),
    ] {
        let rate_of = |c: &Config| match key {
            "limits.uploads_per_minute" => c.limits.uploads_per_minute,
            "limits.deliveries_per_minute" => c.limits.deliveries_per_minute,
            _ => c.limits.tool_calls_per_minute,
        };
        // 0 (no limit), 1, and the ceiling's neighbours below and at it.
        for ok in [0, 1, 2, ceiling - 1, ceiling] {
            let c = Config::load(None, env(&[(var, &ok.to_string())]))
                .unwrap_or_else(|e| panic!("{var}={ok}: {e}"));
            assert_eq!(rate_of(&c), ok, "{var}={ok}");
        }
        let err = Config::load(None, env(&[(var, &(ceiling + 1).to_string())])).unwrap_err();
        assert!(matches!(err, ConfigError::Invalid { .. }), "{err}");
        let said = err.to_string();
        assert!(
            said.contains(var) && said.contains("0 (no limit) to 60000"),
            "{said}"
        );
        // Not a count at all: the type says so, naming the variable.
        for bad in ["-1", "ten", "1.5"] {
            let err = Config::load(None, env(&[(var, bad)])).unwrap_err();
            assert!(err.to_string().contains(var), "{var}={bad}: {err}");
        }
    }
    // The file's `[limits]` table, checked like the environment.
    let f = file("[limits]\nuploads_per_minute = 3\ntool_calls_per_minute = 0\n");
    let c = Config::load(Some(f.path()), env(&[])).unwrap();
    assert_eq!(
        (
            c.limits.uploads_per_minute,
            c.limits.deliveries_per_minute,
            c.limits.tool_calls_per_minute
        ),
        (3, limits::DELIVERIES_PER_MINUTE, 0)
    );
    let f = file("[limits]\ndeliveries_per_minute = 60001\n");
    let err = Config::load(Some(f.path()), env(&[])).unwrap_err();
    assert!(
        err.to_string().contains("limits.deliveries_per_minute"),
        "{err}"
    );
}

#[test]
fn s3_settings_that_would_fail_every_request_stop_ferry_at_start() {
    let s3 = |edit: &dyn Fn(&mut Config)| {
        let mut c = Config::default();
        c.media.backend = crate::MediaBackend::S3;
        c.media.bucket = Some("ferry-media".into());
        c.media.access_key_id = Some("GKkeyid".into());
        c.media.secret_access_key = Some("secret".into());
        edit(&mut c);
        c.validate()
    };
    for endpoint in [
        "http://127.0.0.1:3900",
        "https://s3.example.com",
        "http://garage:3900/",
        "http://[::1]:3900",
    ] {
        assert!(
            s3(&|c| c.media.endpoint = Some(endpoint.into())).is_ok(),
            "{endpoint}"
        );
    }
    for endpoint in [
        "http://[::1",
        "http://127.0.0.1:99999",
        "http://127.0.0.1:0",
        "http://",
        "https://",
        "http://exa mple.com",
        "http://127.0.0.1:3900 ",
        "http://h/a b",
        "http://127.0.0.1:3900/other-bucket/sub",
        "http://127.0.0.1:3900/?x=1",
        "http://127.0.0.1:3900#f",
        "http://user:s3cretpw@127.0.0.1:3900",
        "ftp://store",
    ] {
        let e = s3(&|c| c.media.endpoint = Some(endpoint.into())).unwrap_err();
        assert!(e.to_string().contains("media.endpoint"), "{endpoint}: {e}");
        assert!(!e.to_string().contains("s3cretpw"), "{e}");
    }
    for region in ["", " ", "us-east-1\n", "a b"] {
        let e = s3(&|c| c.media.region = region.into()).unwrap_err();
        assert!(e.to_string().contains("media.region"), "{region:?}: {e}");
    }
    for key in ["GK\nx", "GK x", "\u{7f}"] {
        let e = s3(&|c| c.media.access_key_id = Some(key.into())).unwrap_err();
        assert!(e.to_string().contains("media.access_key_id"), "{e}");
        assert!(!e.to_string().contains(key), "the key is not echoed: {e}");
    }
    for bucket in ["rt..cfg", "192.168.1.1", "ab", "-ferry", "Ferry"] {
        let e = s3(&|c| c.media.bucket = Some(bucket.into())).unwrap_err();
        assert!(e.to_string().contains("media.bucket"), "{bucket}: {e}");
    }
    assert!(s3(&|c| c.media.bucket = Some("192.168.1.1.media".into())).is_ok());
}

#[test]
fn the_media_ttl_at_limit_minus_one_limit_and_plus_one() {
    let max = crate::limits::MEDIA_TTL_MAX_HOURS;
    for (hours, fits) in [
        (0, false),
        (1, true),
        (max - 1, true),
        (max, true),
        (max + 1, false),
    ] {
        let mut c = Config::default();
        c.media.ttl_hours = hours;
        assert_eq!(c.validate().is_ok(), fits, "{hours}");
    }
}
