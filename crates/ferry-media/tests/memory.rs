//! A put's memory is flat in the blob's size. Alone in its file: the counting allocator
//! sees the whole process, so no other test may run beside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use ferry_media::Blobs;
use futures_util::stream::{self, StreamExt};

/// Counts live heap bytes and their peak, to show a put's memory is flat in its size.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A 64 MiB put streams: the heap never holds more than a few MiB of it, and on S3 a
/// few parts (8 MiB each). The two backends run one after the other, never at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mib_put_keeps_memory_flat() {
    let dir = tempfile::tempdir().unwrap();
    put_64_mib(Blobs::local(dir.path()).unwrap(), 6 * 1024 * 1024).await;
    let bucket = ferry_media::testing::S3Bucket::create();
    let mut media = ferry_config::MediaConfig::default();
    bucket.configure(&mut media);
    // The pending part, two parts in flight, and the client's own buffers.
    put_64_mib(
        Blobs::s3(dir.path(), &media, "site").unwrap(),
        26 * 1024 * 1024,
    )
    .await;
}

async fn put_64_mib(blobs: Blobs, ceiling: usize) {
    let size = 64 * 1024 * 1024;
    // The source makes each chunk as it is asked for, so only the put holds bytes.
    let source = stream::iter(0..size / 65536).map(|_| Ok(Bytes::from(vec![1u8; 65536])));
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let staged = blobs.stage(source, u64::MAX).await.unwrap();
    let peak = PEAK.load(Ordering::Relaxed) - base;
    assert_eq!(staged.size, size as u64);
    blobs.place(&staged).await.unwrap();
    blobs.settle(staged).await.unwrap();
    eprintln!("peak heap during a 64 MiB put: {} KiB", peak / 1024);
    assert!(peak < ceiling, "peak {peak} bytes");
}
