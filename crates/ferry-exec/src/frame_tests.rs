//! The worker's frames at their limit: a frame of [`FRAME_MAX_BYTES`] crosses, one byte
//! more is refused by the sender, and a header announcing more is refused by the receiver.

use std::io::Write;
use std::os::unix::net::UnixStream;

use super::{Answer, FRAME_MAX_BYTES, encode, recv_frame, send_frame};
use crate::ops::{FileInfo, Kind, Reply};

fn crosses(len: usize) -> bool {
    let (a, mut b) = UnixStream::pair().unwrap();
    let sender = std::thread::spawn(move || {
        let body = vec![b'x'; len];
        send_frame(&a, &body, None).is_ok()
    });
    let received = recv_frame(&mut b).ok().flatten();
    let sent = sender.join().unwrap();
    match received {
        Some((body, fd)) => {
            assert!(sent);
            assert_eq!(body.len(), len);
            assert!(fd.is_none());
            true
        }
        None => {
            assert!(!sent, "a frame sent was not received");
            false
        }
    }
}

#[test]
fn a_frame_crosses_up_to_the_limit_and_not_past_it() {
    assert!(crosses(FRAME_MAX_BYTES - 1));
    assert!(crosses(FRAME_MAX_BYTES));
    assert!(!crosses(FRAME_MAX_BYTES + 1));
}

#[test]
fn a_header_announcing_more_than_the_limit_is_refused_before_reading() {
    for (len, ok) in [(FRAME_MAX_BYTES, true), (FRAME_MAX_BYTES + 1, false)] {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        a.write_all(&(len as u32).to_be_bytes()).unwrap();
        if ok {
            // The receiver waits for the body it may accept: it is not refused at once.
            drop(a);
            let err = recv_frame(&mut b).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
        } else {
            let err = recv_frame(&mut b).unwrap_err();
            assert!(err.to_string().contains("frame too large"), "{err}");
        }
    }
}

#[test]
fn an_answer_too_large_for_a_frame_becomes_a_refusal() {
    let listing = |name_bytes: usize| {
        Answer::Ok(Reply::Listing {
            entries: vec![FileInfo {
                path: "x".repeat(name_bytes),
                kind: Kind::File,
                size: 0,
                mtime: 0,
                mode: 0o644,
            }],
            total: 1,
        })
    };
    let overhead = serde_json::to_vec(&listing(0)).unwrap().len();
    for (len, fits) in [
        (FRAME_MAX_BYTES - 1, true),
        (FRAME_MAX_BYTES, true),
        (FRAME_MAX_BYTES + 1, false),
    ] {
        let (bytes, fitted) = encode(&listing(len - overhead)).unwrap();
        assert_eq!(fitted, fits, "{len}");
        if fits {
            assert_eq!(bytes.len(), len);
        } else {
            let text = String::from_utf8(bytes).unwrap();
            assert!(
                text.contains("too_large") && text.contains("ask for less"),
                "{text}"
            );
        }
    }
}
