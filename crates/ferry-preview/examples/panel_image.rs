//! Times the Files panel's preview of one image file, in this process alone: the JSON
//! part (`panel_preview`) and the picture (`panel_image`), and prints the process's peak
//! resident memory. Used by `bench/preview/run`; not part of ferry.
//!
//! `cargo run --release -p ferry-preview --example panel_image -- FILE`

use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("usage: panel_image FILE");
    let name = std::path::Path::new(&path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    let mut file = std::fs::File::open(&path).expect("opening the file");
    let size = file.metadata().expect("its size").len();
    // No PDF here: the renderer is never started for an image.
    let renderer = ferry_preview::PdfRenderer::new("/bin/false", Vec::<String>::new());

    let started = Instant::now();
    let preview = ferry_preview::panel_preview(&mut file, &name, size).expect("the JSON part");
    let json_secs = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let picture =
        ferry_preview::panel_image(&mut file, &name, size, &renderer).expect("the picture");
    let image_secs = started.elapsed().as_secs_f64();

    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let peak_kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    println!(
        "{{\"kind\":{:?},\"json_secs\":{json_secs:.4},\"image_secs\":{image_secs:.4},\"width\":{},\"height\":{},\"bytes\":{},\"peak_kib\":{peak_kib}}}",
        serde_json::to_value(&preview).unwrap()["kind"]
            .as_str()
            .unwrap_or(""),
        picture.width,
        picture.height,
        picture.bytes.len()
    );
}
