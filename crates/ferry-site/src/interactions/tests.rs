//! Approvals, picks and their links, against a real site database.

use super::links::{PICK_LINK_KEY_BYTES, PICK_LINK_KEY_FILE};
use super::*;
use crate::layout::SERVICE_DIR;
use ferry_config::Config;
use ferry_config::limits::{
    APPROVAL_MAX_WAIT, INTERACTION_RECORD_TTL, PICK_FILE_TTL, PICK_LINK_TTL,
};
use ferry_fs::FsError;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

fn site_with(config: Config) -> (tempfile::TempDir, Arc<Site>) {
    let tmp = tempfile::tempdir().unwrap();
    let site = Site::open(tmp.path(), crate::testing::metadata(tmp.path(), config)).unwrap();
    site.add_person("me").unwrap();
    site.add_person("bob").unwrap();
    (tmp, Arc::new(site))
}

fn site() -> (tempfile::TempDir, Arc<Site>) {
    site_with(Config::default())
}

fn interaction_error(err: SiteError) -> InteractionError {
    match err {
        SiteError::Interaction(e) => e,
        other => panic!("expected an interaction error, got {other:?}"),
    }
}

/// A pick's link split into what a client sends: `(expires, sig)`.
fn link_parts(link: &str) -> (String, String) {
    let query = link.split_once('?').unwrap().1;
    let mut expires = String::new();
    let mut sig = String::new();
    for pair in query.split('&') {
        match pair.split_once('=').unwrap() {
            ("expires", v) => expires = v.to_owned(),
            ("sig", v) => sig = v.to_owned(),
            other => panic!("unexpected {other:?}"),
        }
    }
    (expires, sig)
}

/// Uploads `bytes` as `name` through the site functions the gateway calls.
fn upload(site: &Site, id: &str, name: &str, bytes: &[u8]) -> Result<PickArrival, SiteError> {
    let claim = site.claim_pick(id)?;
    let (mut writer, safe) = site.pick_writer(&claim, name)?;
    if let Err(e) = writer.write(bytes) {
        drop(writer);
        site.release_pick(&claim)?;
        return Err(e.into());
    }
    site.finish_pick(&claim, writer, &safe)
}

#[test]
fn ids_have_one_shape() {
    let (_tmp, site) = site();
    let approval = site
        .request_approval("me", "file_delete", "a.txt", "")
        .unwrap();
    let pick = site.request_pick("me", "the invoice").unwrap().id;
    assert!(approval.starts_with("ap_") && is_interaction_id(&approval));
    assert!(pick.starts_with("pk_") && is_interaction_id(&pick));
    for bad in [
        "",
        "ap_",
        "xx_abcdefghijklmnop",
        "ap_abcdefghijklmno",
        "ap_abcdefghijklmnopq",
        "ap_ABCDEFGHIJKLMNOP",
        "ap_abcdefghijklmn01",
        "pk_abcdefghijklmn/.",
        "../abcdefghijklmnop",
    ] {
        assert!(!is_interaction_id(bad), "{bad:?}");
    }
}

#[test]
fn presence_lasts_exactly_the_ttl() {
    let (_tmp, site) = site();
    assert!(!site.web_channel_open("me").unwrap(), "never seen");
    let seen = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    site.touch_presence_at("me", seen).unwrap();
    let ms = Duration::from_millis(1);
    assert!(site.web_channel_open_at("me", seen).unwrap());
    assert!(
        site.web_channel_open_at("me", seen + WEB_PRESENCE_TTL - ms)
            .unwrap()
    );
    assert!(
        site.web_channel_open_at("me", seen + WEB_PRESENCE_TTL)
            .unwrap()
    );
    assert!(
        !site
            .web_channel_open_at("me", seen + WEB_PRESENCE_TTL + ms)
            .unwrap()
    );
    assert!(
        !site.web_channel_open_at("bob", seen).unwrap(),
        "only the person touched"
    );
    // An older touch (a slow tick) never moves the time back.
    site.touch_presence_at("me", seen - WEB_PRESENCE_TTL)
        .unwrap();
    assert_eq!(site.last_seen_on_web("me").unwrap(), Some(seen));
    assert!(matches!(
        site.touch_presence("ghost"),
        Err(SiteError::UnknownPerson(_))
    ));
}

#[test]
fn request_text_is_bounded() {
    let (_tmp, site) = site();
    let text = |n| "x".repeat(n);
    for (n, ok) in [
        (INTERACTION_TEXT_MAX_BYTES - 1, true),
        (INTERACTION_TEXT_MAX_BYTES, true),
        (INTERACTION_TEXT_MAX_BYTES + 1, false),
    ] {
        assert_eq!(
            site.request_pick("me", &text(n)).is_ok(),
            ok,
            "prompt of {n}"
        );
        let summary = site.request_approval("me", "file_delete", "a", &text(n));
        assert_eq!(summary.is_ok(), ok, "summary of {n}");
        let subject = site.request_approval("me", "file_delete", &text(n), "");
        assert_eq!(subject.is_ok(), ok, "subject of {n}");
    }
    for empty in ["", "  "] {
        let err = site.request_pick("me", empty).unwrap_err();
        assert!(matches!(
            interaction_error(err),
            InteractionError::InvalidText {
                field: "prompt",
                ..
            }
        ));
        assert!(
            site.request_approval("me", "file_delete", empty, "")
                .is_err()
        );
        assert!(site.request_approval("me", empty, "a.txt", "").is_err());
    }
    assert!(matches!(
        site.request_pick("ghost", "a file"),
        Err(SiteError::UnknownPerson(_))
    ));
}

#[test]
fn an_approval_is_answered_once_by_its_person() {
    let (_tmp, site) = site();
    for approve in [true, false] {
        let id = site
            .request_approval("me", "file_delete", "notes/old.txt", "Delete old.txt")
            .unwrap();
        let pending = site.pending_interactions("me").unwrap();
        assert_eq!(pending.last().map(|i| i.id.as_str()), Some(id.as_str()));
        assert_eq!(
            pending.last().unwrap().kind,
            InteractionKind::Approval {
                tool: "file_delete".into(),
                subject: "notes/old.txt".into(),
                summary: "Delete old.txt".into(),
            }
        );
        assert!(site.pending_interactions("bob").unwrap().is_empty());

        let waiter = {
            let (site, id) = (site.clone(), id.clone());
            std::thread::spawn(move || site.wait_for_approval(&id, Duration::from_secs(20)))
        };
        let err = site.answer_approval("bob", &id, true).unwrap_err();
        assert!(matches!(
            interaction_error(err),
            InteractionError::Unknown(_)
        ));
        site.answer_approval("me", &id, approve).unwrap();
        let want = if approve {
            ApprovalOutcome::Approved
        } else {
            ApprovalOutcome::Denied
        };
        assert_eq!(waiter.join().unwrap().unwrap(), want);
        let err = site.answer_approval("me", &id, !approve).unwrap_err();
        assert!(matches!(
            interaction_error(err),
            InteractionError::AlreadyAnswered
        ));
        assert!(site.pending_interactions("me").unwrap().is_empty());
    }
    let err = site
        .answer_approval("me", "ap_aaaaaaaaaaaaaaaa", true)
        .unwrap_err();
    assert!(matches!(
        interaction_error(err),
        InteractionError::Unknown(_)
    ));
}

#[test]
fn an_unanswered_approval_times_out_and_refuses_a_late_answer() {
    let (_tmp, site) = site();
    let id = site
        .request_approval("me", "file_delete", "a.txt", "")
        .unwrap();
    let outcome = site
        .wait_for_approval(&id, Duration::from_millis(300))
        .unwrap();
    assert_eq!(outcome, ApprovalOutcome::TimedOut);
    let err = site.answer_approval("me", &id, true).unwrap_err();
    assert!(matches!(interaction_error(err), InteractionError::Expired));
    assert!(site.pending_interactions("me").unwrap().is_empty());
}

#[test]
fn a_waiter_shortens_the_expiry_the_person_sees() {
    let (_tmp, site) = site();
    let id = site
        .request_approval("me", "file_delete", "a.txt", "")
        .unwrap();
    let before = site.pending_interactions("me").unwrap()[0].expires;
    assert!(before > SystemTime::now() + APPROVAL_MAX_WAIT - Duration::from_secs(5));
    let waiter = {
        let (site, id) = (site.clone(), id.clone());
        std::thread::spawn(move || site.wait_for_approval(&id, Duration::from_secs(30)))
    };
    let shortened = (0..100)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(20));
            let now = site.pending_interactions("me").unwrap()[0].expires;
            (now < before).then_some(now)
        })
        .expect("the waiter wrote its deadline");
    assert!(shortened <= SystemTime::now() + Duration::from_secs(30));
    site.answer_approval("me", &id, false).unwrap();
    assert_eq!(waiter.join().unwrap().unwrap(), ApprovalOutcome::Denied);
}

#[test]
fn pick_links_are_signed_and_expire_at_their_second() {
    let (_tmp, site) = site();
    let request = site.request_pick("me", "the invoice").unwrap();
    let now_secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let ttl = request
        .link_expires
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - now_secs;
    assert!((PICK_LINK_TTL.as_secs() - 1..=PICK_LINK_TTL.as_secs()).contains(&ttl));
    let link = site.pick_link(&request.id, request.link_expires).unwrap();
    assert!(link.starts_with(&format!("/v1/picks/{}/upload?expires=", request.id)));
    let (expires, sig) = link_parts(&link);
    let at = request.link_expires;
    let second = Duration::from_secs(1);
    let check = |now| site.check_pick_link_at(&request.id, &expires, &sig, now);
    check(at - second).unwrap();
    assert!(matches!(
        interaction_error(check(at).unwrap_err()),
        InteractionError::LinkExpired
    ));
    assert!(matches!(
        interaction_error(check(at + second).unwrap_err()),
        InteractionError::LinkExpired
    ));

    let bad = |id: &str, expires: &str, sig: &str| {
        let err = site.check_pick_link_at(id, expires, sig, at - second);
        matches!(
            err.map_err(interaction_error),
            Err(InteractionError::BadSignature)
        )
    };
    let mut flipped = sig.clone().into_bytes();
    flipped[0] = if flipped[0] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).unwrap();
    let later = (expires.parse::<u64>().unwrap() + 1).to_string();
    assert!(bad(&request.id, &expires, &flipped), "a changed signature");
    assert!(bad(&request.id, &later, &sig), "a later expiry");
    assert!(
        bad(&request.id, &format!("0{expires}"), &sig),
        "a second spelling"
    );
    assert!(bad(&request.id, &format!("+{expires}"), &sig));
    assert!(bad(&request.id, "", &sig));
    assert!(bad(&request.id, &expires, ""));
    assert!(bad(&request.id, &expires, &sig[..sig.len() - 2]));
    assert!(bad(&request.id, &expires, &sig.to_uppercase()));
    assert!(bad("pk_aaaaaaaaaaaaaaaa", &expires, &sig), "another pick");
}

#[test]
fn the_link_key_is_private_made_once_and_shared() {
    let tmp = tempfile::tempdir().unwrap();
    let sites: Vec<Arc<Site>> = (0..4)
        .map(|_| Arc::new(Site::open(tmp.path(), crate::testing::config(tmp.path())).unwrap()))
        .collect();
    let expires = SystemTime::now() + Duration::from_secs(60);
    // Made by several at once: every link any of them made checks with every other.
    let links: Vec<String> = sites
        .iter()
        .map(|site| {
            let site = site.clone();
            std::thread::spawn(move || site.pick_link("pk_aaaaaaaaaaaaaaaa", expires).unwrap())
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    for link in &links {
        assert_eq!(link, &links[0]);
        let (expires, sig) = link_parts(link);
        for site in &sites {
            site.check_pick_link("pk_aaaaaaaaaaaaaaaa", &expires, &sig)
                .unwrap();
        }
    }
    let key = tmp.path().join(SERVICE_DIR).join(PICK_LINK_KEY_FILE);
    let meta = std::fs::metadata(&key).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), PICK_LINK_KEY_BYTES as u64);
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path().join(SERVICE_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(ferry_fs::TEMP_PREFIX))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // Another site has another key.
    let (_other_tmp, other) = site();
    let (expires, sig) = link_parts(&links[0]);
    assert!(
        other
            .check_pick_link("pk_aaaaaaaaaaaaaaaa", &expires, &sig)
            .is_err()
    );
}

#[test]
fn a_pick_arrives_once_and_waits_see_it() {
    let (tmp, site) = site();
    let request = site.request_pick("me", "the invoice").unwrap();
    let waiter = {
        let (site, id) = (site.clone(), request.id.clone());
        std::thread::spawn(move || site.wait_for_pick(&id, Duration::from_secs(20)))
    };
    let arrival = upload(&site, &request.id, "../Q2 report (final).pdf", b"%PDF-1.4").unwrap();
    assert_eq!(arrival.name, "Q2_report_final_.pdf");
    assert_eq!(arrival.size, 8);
    let PickOutcome::Arrived { path, expires } = waiter.join().unwrap().unwrap() else {
        panic!("the file arrived");
    };
    let want = std::path::absolute(tmp.path())
        .unwrap()
        .join(format!("private/people/me/tmp/picks/{}", request.id))
        .join("Q2_report_final_.pdf");
    assert_eq!(path, want);
    assert!(path.is_absolute());
    assert_eq!(std::fs::read(&path).unwrap(), b"%PDF-1.4");
    let lifetime = expires.duration_since(SystemTime::now()).unwrap();
    assert!(lifetime > PICK_FILE_TTL - Duration::from_secs(60) && lifetime <= PICK_FILE_TTL);
    let err = site.claim_pick(&request.id).unwrap_err();
    assert!(matches!(interaction_error(err), InteractionError::LinkUsed));
    assert!(site.pending_interactions("me").unwrap().is_empty());
    // A give-back that comes late (the upload's request ended after it completed).
    let stale = ClaimedPick {
        id: request.id.clone(),
        person: "me".to_owned(),
    };
    site.release_pick(&stale).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"%PDF-1.4",
        "an arrived file stays"
    );
    let err = site.cancel_pick("me", &request.id).unwrap_err();
    assert!(matches!(
        interaction_error(err),
        InteractionError::AlreadyAnswered
    ));
}

#[test]
fn one_upload_at_a_time_and_a_failed_one_gives_the_link_back() {
    let cap = 100;
    let mut config = Config::default();
    config.media.max_upload_bytes = cap;
    let (tmp, site) = site_with(config);
    let id = site.request_pick("me", "a small file").unwrap().id;
    let claim = site.claim_pick(&id).unwrap();
    assert_eq!((claim.id(), claim.person()), (id.as_str(), "me"));
    assert!(
        site.pending_interactions("me").unwrap().is_empty(),
        "not pending while an upload runs"
    );
    let err = site.claim_pick(&id).unwrap_err();
    assert!(matches!(
        interaction_error(err),
        InteractionError::UploadInProgress
    ));
    site.release_pick(&claim).unwrap();
    assert_eq!(site.pending_interactions("me").unwrap().len(), 1);

    let over = upload(&site, &id, "big.bin", &vec![b'x'; cap as usize + 1]).unwrap_err();
    assert!(matches!(over, SiteError::Fs(FsError::TooLarge(n)) if n == cap));
    let picks = tmp.path().join("private/people/me/tmp/picks");
    assert!(
        !picks.join(&id).exists(),
        "nothing kept of a refused upload"
    );
    let at_cap = upload(&site, &id, "full.bin", &vec![b'x'; cap as usize]).unwrap();
    assert_eq!(at_cap.size, cap);
    let other = site.request_pick("me", "another").unwrap().id;
    let under = upload(&site, &other, "less.bin", &vec![b'x'; cap as usize - 1]).unwrap();
    assert_eq!(under.size, cap - 1);
}

#[test]
fn cancelled_and_timed_out_picks_refuse_their_link() {
    let (tmp, site) = site();
    let cancelled = site.request_pick("me", "a file").unwrap().id;
    let waiter = {
        let (site, id) = (site.clone(), cancelled.clone());
        std::thread::spawn(move || site.wait_for_pick(&id, Duration::from_secs(20)))
    };
    let err = site.cancel_pick("bob", &cancelled).unwrap_err();
    assert!(matches!(
        interaction_error(err),
        InteractionError::Unknown(_)
    ));
    site.cancel_pick("me", &cancelled).unwrap();
    assert_eq!(waiter.join().unwrap().unwrap(), PickOutcome::Cancelled);
    let err = site.claim_pick(&cancelled).unwrap_err();
    assert!(matches!(
        interaction_error(err),
        InteractionError::LinkCancelled
    ));

    let timed_out = site.request_pick("me", "a file").unwrap().id;
    let outcome = site
        .wait_for_pick(&timed_out, Duration::from_millis(300))
        .unwrap();
    assert_eq!(outcome, PickOutcome::Expired);
    let err = site.claim_pick(&timed_out).unwrap_err();
    assert!(matches!(
        interaction_error(err),
        InteractionError::LinkExpired
    ));

    // Cancelled while the file streams: the upload fails and keeps nothing.
    let raced = site.request_pick("me", "a file").unwrap().id;
    let claim = site.claim_pick(&raced).unwrap();
    let (mut writer, name) = site.pick_writer(&claim, "a.txt").unwrap();
    writer.write(b"abc").unwrap();
    site.cancel_pick("me", &raced).unwrap();
    let err = site.finish_pick(&claim, writer, &name).unwrap_err();
    assert!(matches!(
        interaction_error(err),
        InteractionError::LinkCancelled
    ));
    assert!(
        !tmp.path()
            .join("private/people/me/tmp/picks")
            .join(&raced)
            .exists()
    );
    let err = site.claim_pick("pk_aaaaaaaaaaaaaaaa").unwrap_err();
    assert!(matches!(
        interaction_error(err),
        InteractionError::Unknown(_)
    ));
    let approval = site.request_approval("me", "file_delete", "a", "").unwrap();
    let err = site.claim_pick(&approval).unwrap_err();
    assert!(
        matches!(interaction_error(err), InteractionError::Unknown(_)),
        "an approval has no link"
    );
}

#[test]
fn an_upload_under_way_outlives_the_link() {
    let (_tmp, site) = site();
    let id = site.request_pick("me", "a file").unwrap().id;
    let claim = site.claim_pick(&id).unwrap();
    // The link expires while the file streams.
    site.db
        .execute(
            "UPDATE interactions SET expires_ms = 0 WHERE id = ?1",
            crate::db::params![&id],
        )
        .unwrap();
    let waiter = {
        let (site, id) = (site.clone(), id.clone());
        std::thread::spawn(move || site.wait_for_pick(&id, Duration::from_secs(20)))
    };
    std::thread::sleep(INTERACTION_POLL_INTERVAL * 2);
    let (mut writer, name) = site.pick_writer(&claim, "late.txt").unwrap();
    writer.write(b"late").unwrap();
    site.finish_pick(&claim, writer, &name).unwrap();
    assert!(matches!(
        waiter.join().unwrap().unwrap(),
        PickOutcome::Arrived { .. }
    ));
}

#[test]
fn sweeping_removes_picked_files_at_their_expiry() {
    let (tmp, site) = site();
    let id = site.request_pick("me", "a file").unwrap().id;
    upload(&site, &id, "a.txt", b"abc").unwrap();
    let PickOutcome::Arrived { path, expires } =
        site.wait_for_pick(&id, Duration::from_secs(5)).unwrap()
    else {
        panic!("arrived");
    };
    let ms = Duration::from_millis(1);
    // A leftover of an attempt that ended, and a folder that is not ours.
    let ended = site.request_pick("me", "a file").unwrap().id;
    site.cancel_pick("me", &ended).unwrap();
    let picks = tmp.path().join("private/people/me/tmp/picks");
    std::fs::create_dir_all(picks.join(&ended)).unwrap();
    std::fs::create_dir_all(picks.join("keep-me")).unwrap();
    // Pending and running picks keep their folders.
    let waiting = site.request_pick("me", "a file").unwrap().id;
    std::fs::create_dir_all(picks.join(&waiting)).unwrap();

    assert_eq!(site.sweep_picks_at(expires - ms).unwrap(), 1);
    assert!(path.exists());
    assert!(!picks.join(&ended).exists());
    assert_eq!(site.sweep_picks_at(expires).unwrap(), 1);
    assert!(!path.exists() && !picks.join(&id).exists());
    assert!(picks.join("keep-me").exists() && picks.join(&waiting).exists());
    assert_eq!(site.sweep_picks_at(expires + ms).unwrap(), 0);

    // Records go after INTERACTION_RECORD_TTL, counted from their creation.
    let created = site.row_of(&id, KIND_PICK).unwrap().is_some();
    assert!(created);
    let later = SystemTime::now() + INTERACTION_RECORD_TTL + Duration::from_secs(5);
    site.sweep_picks_at(later).unwrap();
    assert!(site.row_of(&id, KIND_PICK).unwrap().is_none());
    assert_eq!(
        site.sweep_picks_at(later).unwrap(),
        1,
        "the pending one's folder"
    );
}

#[test]
fn an_upload_stopped_by_its_pick_ending_keeps_nothing() {
    let (tmp, site) = site();
    let picks = tmp.path().join("private/people/me/tmp/picks");
    for cancelled in [true, false] {
        let id = site.request_pick("me", "a file").unwrap().id;
        let claim = site.claim_pick(&id).unwrap();
        assert!(site.pick_upload_stops(&claim).unwrap().is_none());
        let (mut writer, _) = site.pick_writer(&claim, "a.txt").unwrap();
        writer.write(b"abc").unwrap();
        if cancelled {
            site.cancel_pick("me", &id).unwrap();
        } else {
            // The agent's wait gives up while the file streams.
            let outcome = site.wait_for_pick(&id, Duration::from_millis(1)).unwrap();
            assert_eq!(outcome, PickOutcome::Expired);
        }
        let why = site.pick_upload_stops(&claim).unwrap().expect("stops");
        assert_eq!(
            matches!(why, InteractionError::LinkCancelled),
            cancelled,
            "{why:?}"
        );
        assert!(cancelled || matches!(why, InteractionError::LinkExpired));
        // The gateway drops the upload and gives the claim back: nothing stays.
        drop(writer);
        site.release_pick(&claim).unwrap();
        assert!(!picks.join(&id).exists(), "cancelled: {cancelled}");
        assert!(site.claim_pick(&id).is_err(), "not pending again");
    }
    assert_eq!(std::fs::read_dir(&picks).unwrap().count(), 0);
}

#[test]
fn a_host_pick_cancelled_while_it_is_copied_is_never_put_in_place() {
    let mut config = Config::default();
    config.site.mode = ferry_config::SiteMode::Host;
    let (tmp, site) = site_with(config);
    let destination_dir = tmp.path().join("placed");
    std::fs::create_dir_all(&destination_dir).unwrap();
    let id = site.request_pick("me", "a file").unwrap().id;
    let claim = site.claim_pick(&id).unwrap();
    let (mut writer, name) = site.pick_writer(&claim, "a.txt").unwrap();
    writer.write(b"abc").unwrap();
    let put_ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let place = |staged: &std::path::Path, _: &std::path::Path| {
        let copy = destination_dir.join(".copy");
        std::fs::copy(staged, &copy).map_err(FsError::from_io)?;
        // The person cancels while the file is copied into their folder.
        site.cancel_pick("me", &id).map_err(|e| FsError::Relayed {
            code: e.code(),
            message: e.to_string(),
        })?;
        let ran = put_ran.clone();
        let put: PutInPlace = Box::new(move || {
            ran.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        });
        Ok(put)
    };
    let err = site
        .finish_pick_with(&claim, writer, &name, &place)
        .unwrap_err();
    assert!(matches!(
        interaction_error(err),
        InteractionError::LinkCancelled
    ));
    assert!(!put_ran.load(std::sync::atomic::Ordering::SeqCst));
    assert!(
        !tmp.path().join(".ferry/picks").join(&id).exists(),
        "no staged copy"
    );
}
