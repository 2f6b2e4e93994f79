//! Page events shared between the gateways of one site (spec S-GATEWAYS): a page
//! connected to gateway B sees an upload made through gateway A. Each gateway sends the
//! events its handlers publish to the others through the metadata database (PostgreSQL
//! `NOTIFY` on [`CHANNEL`]), and hands what the others send to its own pages. A site on
//! SQLite has one gateway, and nothing is shared.
//!
//! What a gateway notices by watching (files agents write into `public/attachments/`,
//! pending approvals and picks) every gateway notices for its own pages, so only what
//! handlers publish, and node links coming and going, cross over.
//!
//! After the listening connection broke, events sent meanwhile are lost: every page is
//! then told to read everything again (a `files` event without paths, a `nodes` event
//! without an id), as a page that fell behind is.

use std::sync::Arc;

use ferry_site::Site;
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::events::{FileEvent, NodesEvent, PageEvent};

/// How long a starting gateway waits to hear the other gateways before it serves.
const LISTEN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// The notification channel of a site's page events.
pub(crate) const CHANNEL: &str = "ferry_page_events";
/// PostgreSQL refuses payloads of 8000 bytes and more: a longer event is sent without
/// its paths, which tells the pages to read everything again.
const PAYLOAD_MAX_BYTES: usize = 7900;

/// An event as it crosses between gateways.
#[derive(Serialize, Deserialize)]
struct Shared {
    /// The gateway that sent it, which ignores its own.
    from: String,
    #[serde(flatten)]
    event: SharedEvent,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum SharedEvent {
    Files {
        person: String,
        project: Option<String>,
        paths: Vec<String>,
    },
    Nodes {
        id: Option<String>,
    },
}

/// Where this gateway sends its events for the others.
pub(crate) struct Outbox {
    site: Arc<Site>,
    from: Arc<str>,
}

impl Outbox {
    /// Sends `event` to the other gateways, from a blocking thread; a failure is logged
    /// (the other gateways' pages miss one event, as on a lost connection).
    pub(crate) fn share(&self, event: &PageEvent) {
        let Some(payload) = encode(&self.from, event) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let site = self.site.clone();
        runtime.spawn_blocking(move || {
            if let Err(e) = site.notify_gateways(CHANNEL, &payload) {
                tracing::warn!("sharing a page event with the other gateways: {e}");
            }
        });
    }
}

fn encode(from: &str, event: &PageEvent) -> Option<String> {
    let event = match event {
        PageEvent::Files(e) => SharedEvent::Files {
            person: e.person.clone(),
            project: e.project.clone(),
            paths: e.paths.clone(),
        },
        PageEvent::Nodes(e) => SharedEvent::Nodes { id: e.id.clone() },
        // Every gateway watches the pending requests of its own pages.
        PageEvent::Interactions(_) => return None,
    };
    let mut shared = Shared {
        from: from.to_owned(),
        event,
    };
    let mut payload = serde_json::to_string(&shared).ok()?;
    if payload.len() > PAYLOAD_MAX_BYTES {
        if let SharedEvent::Files { paths, .. } = &mut shared.event {
            paths.clear();
        }
        payload = serde_json::to_string(&shared).ok()?;
    }
    (payload.len() <= PAYLOAD_MAX_BYTES).then_some(payload)
}

/// The event in `payload`, unless this gateway sent it or it does not parse.
fn decode(me: &str, payload: &str) -> Option<PageEvent> {
    let shared: Shared = match serde_json::from_str(payload) {
        Ok(shared) => shared,
        Err(e) => {
            tracing::warn!("a page event from another gateway does not parse: {e}");
            return None;
        }
    };
    if shared.from == me {
        return None;
    }
    Some(match shared.event {
        SharedEvent::Files {
            person,
            project,
            paths,
        } => PageEvent::Files(FileEvent {
            person,
            project,
            paths,
        }),
        SharedEvent::Nodes { id } => PageEvent::Nodes(NodesEvent { id }),
    })
}

/// Starts sharing on a site whose metadata several gateways can share (nothing is
/// shared on SQLite). The listener lives as long as the gateway's events.
pub(crate) fn start(state: &AppState) {
    let (events, me) = (state.events.clone(), state.gateway_id.clone());
    let (again, me_too) = (state.events.clone(), state.gateway_id.clone());
    let listener = state.site.listen_gateways(
        CHANNEL,
        move |payload| {
            if let Some(event) = decode(&me, &payload) {
                events.deliver(event);
            }
        },
        move || {
            // Events may have been missed: every open page reads everything again.
            tracing::info!(gateway = %me_too, "page events from the other gateways resumed");
            for person in again.watched() {
                again.deliver(PageEvent::Files(FileEvent {
                    person,
                    project: None,
                    paths: Vec::new(),
                }));
            }
            again.deliver(PageEvent::Nodes(NodesEvent { id: None }));
        },
    );
    let Some(listener) = listener else { return };
    // A gateway that starts hears the others before it serves (a few milliseconds); if
    // it cannot yet, `/readyz` says so until it does.
    let deadline = std::time::Instant::now() + LISTEN_WAIT;
    while !listener.is_listening() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _ = state.events.listener.set(listener);
    let _ = state.events.shared.set(Outbox {
        site: state.site.clone(),
        from: state.gateway_id.clone(),
    });
}

/// Whether this gateway hears the other gateways' events (always, on SQLite): `/readyz`
/// waits for it, so no page is served events it would miss.
pub(crate) fn hearing(state: &AppState) -> bool {
    state
        .events
        .listener
        .get()
        .is_none_or(ferry_site::SiteListener::is_listening)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_cross_once_and_a_long_one_loses_its_paths() {
        let files = PageEvent::Files(FileEvent {
            person: "ann".into(),
            project: Some("q2".into()),
            paths: vec!["public/a.txt".into()],
        });
        let payload = encode("A", &files).unwrap();
        assert!(decode("A", &payload).is_none(), "a gateway ignores its own");
        match decode("B", &payload) {
            Some(PageEvent::Files(e)) => {
                assert_eq!(
                    (e.person.as_str(), e.project.as_deref()),
                    ("ann", Some("q2"))
                );
                assert_eq!(e.paths, ["public/a.txt"]);
            }
            _ => panic!("not a files event"),
        }
        let long = PageEvent::Files(FileEvent {
            person: "ann".into(),
            project: None,
            paths: (0..1000).map(|i| format!("public/{i:04}.txt")).collect(),
        });
        let payload = encode("A", &long).unwrap();
        assert!(payload.len() <= PAYLOAD_MAX_BYTES);
        match decode("B", &payload) {
            Some(PageEvent::Files(e)) => assert!(e.paths.is_empty()),
            _ => panic!("not a files event"),
        }
        for bad in ["", "{}", "[]", r#"{"from":"A","kind":"other"}"#] {
            assert!(decode("B", bad).is_none(), "{bad}");
        }
    }
}
