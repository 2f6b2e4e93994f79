//! `dir_list`'s page tokens (spec nodes.md `dir_list`): any token a client sends back,
//! for any folder. A token is taken only for the folder it was made for and only in the
//! spelling it was made in (letter case aside), and names the entry it was made after.
#![no_main]

use ferry_tools::fuzzing::{decode_page_token, page_token, start_after};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The folder, 0xff, then a token (or the name a token is made from).
    let mut pieces = data.splitn(2, |&b| b == 0xff);
    let (Some(folder), Some(rest)) = (pieces.next(), pieces.next()) else {
        return;
    };
    let (Ok(folder), Ok(rest)) = (std::str::from_utf8(folder), std::str::from_utf8(rest)) else {
        return;
    };
    let other = format!("{folder}/other");

    // The token of a page ending at `rest`.
    let token = page_token(folder, rest);
    assert!(
        token
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'2'..=b'7'))
    );
    if rest.is_empty() {
        assert!(
            decode_page_token(&token, folder).is_err(),
            "a token names an entry"
        );
    } else {
        assert_eq!(decode_page_token(&token, folder).unwrap(), rest.as_bytes());
        assert_eq!(
            start_after(Some(&token.to_ascii_uppercase()), folder).unwrap(),
            Some(rest.to_owned())
        );
        let refused = start_after(Some(&token), &other).unwrap_err();
        assert_eq!(refused.code, "bad_page_token");
    }

    // `rest` as a token given back.
    assert_eq!(start_after(None, folder).unwrap(), None);
    match decode_page_token(rest, folder) {
        Ok(raw) => {
            assert!(!raw.is_empty());
            match start_after(Some(rest), folder) {
                Ok(after) => {
                    let after = after.unwrap();
                    assert_eq!(after.as_bytes(), raw);
                    assert_eq!(page_token(folder, &after), rest.to_ascii_lowercase());
                }
                Err(e) => {
                    assert_eq!(e.code, "bad_page_token");
                    assert!(std::str::from_utf8(&raw).is_err());
                }
            }
            assert!(decode_page_token(rest, &other).is_err());
        }
        Err(e) => {
            assert_eq!(e.code, "bad_page_token");
            assert!(start_after(Some(rest), folder).is_err());
        }
    }
});
