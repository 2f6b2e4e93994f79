//! The herd's envelopes (spec handoffs.md H-MAIL): any bytes as a message file in a
//! mailbox. An envelope taken keeps every rule of one, reads back the same when written
//! again, verifies once sealed (also after the trip through a mailbox file), and no
//! envelope verifies under a key that did not seal it.
#![no_main]

use ferry_config::limits::MAILBOX_MAX_BYTES;
use ferry_herd::envelope::{ENVELOPE_VERSION, Envelope};
use ferry_herd::keys::{MAC_HEX_LEN, WorkerKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(envelope) = Envelope::parse(data) else {
        return;
    };
    assert!(data.len() <= MAILBOX_MAX_BYTES);
    assert_eq!(envelope.version, ENVELOPE_VERSION);
    assert!(
        envelope.id.len() == 26
            && envelope
                .id
                .bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'2'..=b'7'))
    );
    assert!(envelope.seq > 0);
    for text in [
        &envelope.from,
        &envelope.to,
        &envelope.text,
        &envelope.sent_at,
    ] {
        assert!(!text.contains('\0'));
    }
    if let Some(mac) = &envelope.mac {
        assert!(mac.len() == MAC_HEX_LEN && mac.bytes().all(|b| b.is_ascii_hexdigit()));
    }
    for file in &envelope.files {
        assert!(file.path.starts_with('/') && !file.path.contains('\0'));
        match &file.content {
            Some(content) => {
                assert!(file.embedded && content.len() as u64 == file.size);
                assert!(!content.contains('\0'));
            }
            None => assert!(!file.embedded),
        }
    }

    // Written again (as a mailbox file holds it), it reads back the same.
    let bytes = envelope.to_bytes();
    if bytes.len() <= MAILBOX_MAX_BYTES {
        assert_eq!(Envelope::parse(&bytes).unwrap(), envelope);
    }

    // Sealed, it verifies under its key only, there and after the trip.
    let key = WorkerKey::from_hex(&"5a".repeat(32)).unwrap();
    let other = WorkerKey::from_hex(&"a5".repeat(32)).unwrap();
    assert!(!envelope.verifies(&key), "verified without being sealed");
    let mut sealed = envelope.clone();
    sealed.seal(&key);
    assert!(sealed.verifies(&key) && !sealed.verifies(&other));
    let bytes = sealed.to_bytes();
    if bytes.len() <= MAILBOX_MAX_BYTES {
        let read = Envelope::parse(&bytes).unwrap();
        assert!(read.verifies(&key) && !read.verifies(&other));
        // Any change to what was sealed breaks the seal.
        let mut changed = read.clone();
        changed.seq = changed.seq.wrapping_add(1).max(1);
        assert!(!changed.verifies(&key));
    }
});
