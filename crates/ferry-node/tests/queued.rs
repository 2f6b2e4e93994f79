//! Calls that wait for a slot on a full link (`Link::open_queued`, `Link::call_queued`):
//! ten thousand at once against one node, a waiter given up, a link that dies under its
//! waiters.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{config, duplex, linked};
use ferry_codes::Code;
use ferry_node::mux::{Handler, Role, handler};
use ferry_node::{Incoming, Link};
use serde_json::json;

const CALLS: usize = 10_000;
/// What the process may grow by while ten thousand calls wait: generous, but far below
/// what an unbounded queue of streams and buffers would take.
const RSS_GROWTH_MAX_BYTES: u64 = 200 * 1024 * 1024;

/// Counts the requests the node serves at once, and the most it ever served at once.
#[derive(Default)]
struct Concurrency {
    now: AtomicUsize,
    peak: AtomicUsize,
}

fn echo_node(seen: Arc<Concurrency>) -> Handler {
    handler(move |incoming: Incoming| {
        let seen = seen.clone();
        async move {
            let now = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
            seen.peak.fetch_max(now, Ordering::SeqCst);
            // Long enough that the callers pile up behind the cap.
            tokio::time::sleep(Duration::from_millis(1)).await;
            seen.now.fetch_sub(1, Ordering::SeqCst);
            match incoming.command.as_str() {
                "hold" => incoming.reply.cancellation().cancelled().await,
                _ => incoming.reply.ok(incoming.args).unwrap(),
            }
        }
    })
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_queued_calls_are_all_answered_within_the_cap() {
    let seen = Arc::new(Concurrency::default());
    let (gateway, _node) = linked(echo_node(seen.clone()));
    let before = rss_bytes();
    let peak_open = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (gateway, peak_open) = (gateway.clone(), peak_open.clone());
        tokio::spawn(async move {
            loop {
                peak_open.fetch_max(gateway.open_streams(), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        })
    };
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..CALLS {
        let gateway = gateway.clone();
        calls.spawn(async move {
            let answer = gateway.call_queued("echo", json!({ "i": i })).await;
            (i, answer.map(|r| r.result))
        });
    }
    let mut peak_rss = 0;
    let mut answered = vec![false; CALLS];
    let collect = async {
        while let Some(joined) = calls.join_next().await {
            let (i, result) = joined.unwrap();
            assert_eq!(result.unwrap(), json!({ "i": i }), "call {i}");
            answered[i] = true;
            if i % 500 == 0 {
                peak_rss = peak_rss.max(rss_bytes());
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(120), collect)
        .await
        .expect("every call is answered in time");
    sampler.abort();
    assert!(answered.iter().all(|a| *a));
    let peak_open = peak_open.load(Ordering::SeqCst);
    let peak_served = seen.peak.load(Ordering::SeqCst);
    assert!(peak_open <= 64, "{peak_open} streams open at once");
    assert!(peak_served <= 64, "the node served {peak_served} at once");
    assert!(peak_served > 1, "the calls really ran side by side");
    let growth = peak_rss.max(rss_bytes()).saturating_sub(before);
    eprintln!(
        "{CALLS} queued calls: peak {peak_open} streams open, {peak_served} served at once, \
         RSS grew by {} KiB",
        growth / 1024
    );
    assert!(growth < RSS_GROWTH_MAX_BYTES, "RSS grew by {growth} bytes");
    assert_eq!(gateway.open_streams(), 0);
}

/// A gateway link carrying at most one call, and the node it calls.
fn one_slot() -> (Link, Link) {
    let ((g_tx, g_rx), (n_tx, n_rx)) = duplex();
    let mut gateway_config = config(Role::Gateway);
    gateway_config.max_streams = 1;
    let gateway = Link::spawn(g_tx, g_rx, gateway_config, None);
    let node = Link::spawn(
        n_tx,
        n_rx,
        config(Role::Node),
        Some(echo_node(Arc::default())),
    );
    (gateway, node)
}

#[tokio::test]
async fn a_waiter_given_up_takes_no_slot() {
    let (gateway, _node) = one_slot();
    let held = gateway.open("hold", json!({}), false).unwrap();
    // Waits, is dropped while waiting.
    let waited = tokio::time::timeout(
        Duration::from_millis(100),
        gateway.call_queued("echo", json!(1)),
    )
    .await;
    assert!(waited.is_err(), "it waited for the held slot");
    // The slot is still the held call's: `open` is still busy.
    let Err(e) = gateway.open("echo", json!(2), false) else {
        panic!("a slot was free")
    };
    assert_eq!(e.code(), Code::LinkBusy);
    drop(held);
    // Given back, and the dropped waiter did not take it.
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        gateway.open("echo", json!(3), false).unwrap().response(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(answer.result, json!(3));
}

#[tokio::test]
async fn waiters_are_served_in_order_once_a_slot_frees() {
    let (gateway, _node) = one_slot();
    let held = gateway.open("hold", json!({}), false).unwrap();
    let first = tokio::spawn({
        let gateway = gateway.clone();
        async move { gateway.call_queued("echo", json!("first")).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second = tokio::spawn({
        let gateway = gateway.clone();
        async move { gateway.call_queued("echo", json!("second")).await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(held);
    let first = tokio::time::timeout(Duration::from_secs(5), first).await;
    assert_eq!(first.unwrap().unwrap().unwrap().result, json!("first"));
    let second = tokio::time::timeout(Duration::from_secs(5), second).await;
    assert_eq!(second.unwrap().unwrap().unwrap().result, json!("second"));
}

#[tokio::test]
async fn a_link_that_dies_fails_every_waiter_at_once() {
    let (gateway, _node) = one_slot();
    let _held = gateway.open("hold", json!({}), false).unwrap();
    let waiters: Vec<_> = (0..5)
        .map(|i| {
            let gateway = gateway.clone();
            tokio::spawn(async move { gateway.call_queued("echo", json!(i)).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    gateway.close();
    for waiter in waiters {
        let outcome = tokio::time::timeout(Duration::from_millis(500), waiter)
            .await
            .expect("told at once")
            .unwrap();
        let Err(e) = outcome else {
            panic!("answered on a dead link")
        };
        assert_eq!(e.code(), Code::NodeOffline);
    }
    let Err(e) = gateway.open_queued("echo", json!({}), false).await else {
        panic!("opened on a dead link")
    };
    assert_eq!(e.code(), Code::NodeOffline);
}

/// Answers with a body of `n` small pieces.
fn body_node() -> Handler {
    handler(|incoming: Incoming| async move {
        let n = incoming.args["n"].as_u64().unwrap();
        let mut writer = incoming.reply.stream(json!({"n": n})).unwrap();
        for i in 0..n {
            writer
                .send(bytes::Bytes::from(format!("{{\"line\":{i}}}\n")))
                .await
                .unwrap();
        }
        writer.finish().await.unwrap();
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_queued_calls_with_bodies_are_all_read_whole() {
    let (gateway, _node) = linked(body_node());
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..CALLS {
        let gateway = gateway.clone();
        calls.spawn(async move {
            let mut response = gateway.call_queued("lines", json!({"n": 20})).await?;
            common::drain(&mut response.body).await
        });
    }
    let mut read = 0;
    while let Some(joined) = calls.join_next().await {
        let bytes = joined.unwrap().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            bytes,
            (0..20)
                .map(|i| format!("{{\"line\":{i}}}\n").len() as u64)
                .sum::<u64>()
        );
        read += 1;
    }
    assert_eq!(read, CALLS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_queued_calls_polled_in_one_task_are_all_read_whole() {
    let (gateway, _node) = linked(body_node());
    let calls = (0..CALLS).map(|_| {
        let gateway = gateway.clone();
        async move {
            let mut response = gateway.call_queued("lines", json!({"n": 20})).await?;
            common::drain(&mut response.body).await
        }
    });
    let results = futures_util::future::join_all(calls).await;
    for result in results {
        result.unwrap_or_else(|e| panic!("{e}"));
    }
}
