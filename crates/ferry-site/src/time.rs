//! RFC 3339 timestamps without a calendar dependency.

use std::time::{SystemTime, UNIX_EPOCH};

use ferry_archive::civil_from_days;

/// `2026-11-30T10:00:00Z` (UTC, whole seconds).
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        );
    }
    // Written digit by digit: a listing writes one per entry, and `format!`'s padding
    // was a tenth of a 10,000-entry listing's time.
    let mut out = *b"0000-00-00T00:00:00Z";
    let mut put = |at: usize, width: usize, mut value: u64| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, 4, y as u64);
    put(5, 2, u64::from(m));
    put(8, 2, u64::from(d));
    put(11, 2, rem / 3600);
    put(14, 2, rem % 3600 / 60);
    put(17, 2, rem % 60);
    out.iter().map(|&b| char::from(b)).collect()
}

/// The instant `text` names: `2026-11-30T10:00:00Z` (UTC, whole seconds, as
/// [`rfc3339`] writes them) or whole seconds since the Unix epoch. Anything else, or a
/// day that does not exist, is `None`.
pub fn parse_instant(text: &str) -> Option<SystemTime> {
    if !text.is_empty() && text.len() <= 12 && text.bytes().all(|b| b.is_ascii_digit()) {
        return Some(UNIX_EPOCH + std::time::Duration::from_secs(text.parse().ok()?));
    }
    let b = text.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, m, d) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hh, mm, ss) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if y < 1970 || !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 59
    {
        return None;
    }
    // Days since the epoch, through March-based years (so the leap day comes last).
    let (yy, mp) = if m > 2 { (y, m - 3) } else { (y - 1, m + 9) };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    // A day past the month's end (February 30) comes back as another date.
    if civil_from_days(days) != (y, m as u32, d as u32) {
        return None;
    }
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    Some(UNIX_EPOCH + std::time::Duration::from_secs(u64::try_from(secs).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn instants_are_written_as_rfc_3339() {
        let at = |secs: u64| rfc3339(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_796_032_859), "2026-11-30T10:00:59Z");
        assert_eq!(at(253_402_300_799), "9999-12-31T23:59:59Z");
        assert_eq!(at(253_402_300_800), "10000-01-01T00:00:00Z");
    }

    #[test]
    fn instants_are_read_back_as_written_and_nothing_else_is() {
        for secs in [0u64, 951_782_400, 1_796_032_800, 4_102_444_799] {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            assert_eq!(parse_instant(&rfc3339(t)), Some(t), "{secs}");
            assert_eq!(parse_instant(&secs.to_string()), Some(t));
        }
        for bad in [
            "",
            "2026-02-30T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30 10:00:00Z",
            "2026-11-30T10:00:00+01:00",
            "1969-12-31T23:59:59Z",
            "2026-1-30T10:00:00Z",
            "+026-11-30T10:00:00Z",
            "1e9",
            "-5",
            "99999999999999",
        ] {
            assert_eq!(parse_instant(bad), None, "{bad}");
        }
    }

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_796_032_800)),
            "2026-11-30T10:00:00Z"
        );
    }
}
