//! Memory stays flat in the archive's size: planning and extracting 64 MiB of files
//! holds no more than small buffers, measured by a counting allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Read;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use ferry_archive::{EntryMeta, PlanOptions, TarWriter, extract};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
        PEAK.fetch_max(live, Ordering::SeqCst);
        // SAFETY: the caller's layout is passed on as it came.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One test at a time: the peak is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

/// The most bytes `f` had allocated at once beyond what was live before it.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    let out = f();
    (out, PEAK.load(Ordering::SeqCst) - base)
}

const MIB: u64 = 1024 * 1024;

fn zeros_gz(files: u64, size: u64) -> Vec<u8> {
    let mut writer = TarWriter::gzip(Vec::new());
    for i in 0..files {
        let data = std::io::repeat(0).take(size);
        writer
            .add_file(&format!("z{i}"), size, EntryMeta::default(), data)
            .unwrap();
    }
    writer.finish().unwrap()
}

#[test]
fn planning_64_mib_holds_less_than_one_mib() {
    let _serial = SERIAL.lock().unwrap();
    let archive = zeros_gz(4, 16 * MIB);
    let (plan, peak) = peak_during(|| ferry_archive::plan(&archive[..], &PlanOptions::default()));
    assert_eq!(plan.unwrap().total_bytes(), 64 * MIB);
    eprintln!("planning 64 MiB: {peak} bytes at most");
    assert!(peak < MIB as usize, "planning held {peak} bytes at once");
}

#[test]
fn extracting_16_mib_holds_less_than_one_mib() {
    let _serial = SERIAL.lock().unwrap();
    let archive = zeros_gz(1, 16 * MIB);
    let plan = ferry_archive::plan(&archive[..], &PlanOptions::default()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let parent = ferry_fs::Dir::open_ambient(tmp.path()).unwrap();
    let (done, peak) = peak_during(|| extract(&archive[..], &plan, &parent, "out"));
    assert_eq!(done.unwrap().bytes, 16 * MIB);
    eprintln!("extracting 16 MiB: {peak} bytes at most");
    assert!(peak < MIB as usize, "extraction held {peak} bytes at once");
}

#[test]
fn writing_64_mib_holds_less_than_one_mib_besides_its_output() {
    let _serial = SERIAL.lock().unwrap();
    let (_, peak) = peak_during(|| {
        let mut writer = TarWriter::gzip(std::io::sink());
        for i in 0..4 {
            let data = std::io::repeat(1).take(16 * MIB);
            writer
                .add_file(&format!("f{i}"), 16 * MIB, EntryMeta::default(), data)
                .unwrap();
        }
        writer.finish().unwrap();
    });
    eprintln!("writing 64 MiB: {peak} bytes at most");
    assert!(peak < MIB as usize, "writing held {peak} bytes at once");
}
