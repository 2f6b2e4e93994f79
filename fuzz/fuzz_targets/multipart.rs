//! Uploads' multipart bodies (M-UP), as `POST /v1/media` reads them: any `Content-Type`,
//! any body, arriving in chunks of any size. The body is refused only as a malformed or
//! oversized request, never as the gateway's own failure; how the body is cut into
//! chunks changes nothing; and a file's name and folder become safe ones or are refused.
#![no_main]

use std::sync::OnceLock;

use ferry_codes::Code;
use ferry_config::limits::{FOLDER_FIELD_MAX_BYTES, PROJECT_FIELD_MAX_BYTES};
use ferry_gateway::fuzzing::{Part, multipart};
use ferry_site::PublicPlace;
use libfuzzer_sys::fuzz_target;

/// The file may hold this many bytes (the stream a little more, for the framing).
const MAX: u64 = 64;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    })
}

/// What a read came to, comparable across chunkings.
fn outcome(result: Result<Vec<Part>, ferry_gateway::ApiError>) -> Result<Vec<Part>, Code> {
    result.map_err(|e| e.code)
}

fuzz_target!(|data: &[u8]| {
    // A flags byte, the Content-Type's length, the Content-Type, then the body.
    let [flags, type_len, rest @ ..] = data else {
        return;
    };
    let (content_type, body) = rest.split_at(usize::from(*type_len).min(rest.len()));
    let declared = (flags & 1 == 1).then_some(body.len() as u64);
    let chunk = 1 + usize::from(flags >> 1);
    let chunks: Vec<Vec<u8>> = body.chunks(chunk).map(<[u8]>::to_vec).collect();

    let read = |chunks| runtime().block_on(multipart(content_type, declared, chunks, MAX));
    let cut = outcome(read(chunks));
    let whole = outcome(read(vec![body.to_vec()]));
    match (&cut, &whole) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.len(), b.len());
            for (a, b) in a.iter().zip(b) {
                assert_eq!(
                    (&a.name, &a.file_name, &a.bytes),
                    (&b.name, &b.file_name, &b.bytes)
                );
            }
        }
        (Err(a), Err(b)) => assert_eq!(a, b, "chunks of {chunk}"),
        _ => panic!("chunks of {chunk} read as {cut:?}, the whole body as {whole:?}"),
    }

    let parts = match cut {
        Ok(parts) => parts,
        Err(code) => {
            assert!(
                matches!(
                    code,
                    Code::BadMultipart | Code::TooLarge | Code::FieldTooLarge | Code::BadBody
                ),
                "refused as {code}"
            );
            return;
        }
    };
    assert!(parts.iter().map(|p| p.bytes.len()).sum::<usize>() <= body.len());
    for part in &parts {
        match part.name.as_deref() {
            Some("project") => assert!(part.bytes.len() <= PROJECT_FIELD_MAX_BYTES),
            Some("folder") => {
                assert!(part.bytes.len() <= FOLDER_FIELD_MAX_BYTES);
                let folder = std::str::from_utf8(&part.bytes).unwrap();
                match PublicPlace::upload_folder(folder) {
                    Ok(PublicPlace::Folder(rel)) => {
                        assert!(!rel.is_empty() && !rel.starts_with('/'), "{rel:?}");
                        assert!(
                            rel.split('/')
                                .all(|c| !c.is_empty() && c != "." && c != ".."),
                            "{rel:?}"
                        );
                        assert!(rel != "attachments" && !rel.starts_with("attachments/"));
                    }
                    Ok(PublicPlace::Public) | Err(_) => {}
                    Ok(PublicPlace::Attachments) => panic!("an upload into attachments"),
                }
            }
            _ => {}
        }
        if let Some(given) = &part.file_name
            && let Ok(name) = ferry_fs::safe_name(given)
        {
            assert!(!name.contains(['/', '\\', '\0']) && !name.starts_with('.'));
        }
    }
});
