//! Paths from outside (C-PATH): a relative path as the confined file access takes it,
//! split into its parent and name, and a `public/…` path of the Files panel and of an
//! upload's `folder`. What is accepted never leaves where it is confined to.
#![no_main]

use ferry_fs::{FsError, PATH_MAX_BYTES, is_temporary};
use ferry_site::{PublicPath, PublicPlace};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };

    let relative = ferry_fs::check_relative(path);
    if relative.is_ok() {
        assert!(!path.is_empty() && path.len() <= PATH_MAX_BYTES);
        assert!(!path.contains('\0') && !path.starts_with('/'));
        assert!(!path.split('/').any(|c| c == ".."), "{path:?}");
    }

    match ferry_fs::fuzzing::split_parent(path) {
        Ok((parent, name)) => {
            assert!(
                !name.is_empty() && name != "." && !name.contains('/'),
                "{path:?}"
            );
            assert!(path.trim_end_matches('/').ends_with(name), "{path:?}");
            if let Some(parent) = parent {
                assert!(path.starts_with(parent), "{path:?}");
                assert!(!parent.trim_matches(['/', '.']).is_empty(), "{path:?}");
            }
            if relative.is_ok() {
                assert_ne!(name, "..", "{path:?}");
                assert!(parent.is_none_or(|p| !p.split('/').any(|c| c == "..")));
            }
        }
        Err(e) => assert!(matches!(e, FsError::EmptyPath), "{e:?}"),
    }

    if let Ok(public) = PublicPath::parse(path) {
        let shown = public.display();
        assert!(
            shown == "public" || shown.starts_with("public/"),
            "{shown:?}"
        );
        let rest = shown.strip_prefix("public").unwrap();
        assert!(
            rest.split('/')
                .skip(1)
                .all(|c| !c.is_empty() && c != "." && c != ".."),
            "{path:?} shown as {shown:?}"
        );
        assert!(!shown.split('/').any(is_temporary), "{shown:?}");
        assert_eq!(public.is_root(), shown == "public");
        assert_eq!(
            public.in_attachments(),
            shown == "public/attachments" || shown.starts_with("public/attachments/")
        );
        assert!(!public.name().is_empty() && !public.name().contains('/'));
        // The shown path names the same place again.
        assert_eq!(PublicPath::parse(&shown).unwrap(), public, "{path:?}");

        match PublicPlace::upload_folder(path) {
            Ok(PublicPlace::Public) => assert!(public.is_root()),
            Ok(PublicPlace::Folder(rel)) => {
                assert!(!public.in_attachments() && !rel.is_empty());
                assert_eq!(format!("public/{rel}"), shown);
            }
            Ok(PublicPlace::Attachments) => panic!("an upload placed in attachments"),
            Err(_) => assert!(public.in_attachments(), "{path:?}"),
        }
    } else {
        assert!(PublicPlace::upload_folder(path).is_err());
    }
});
