//! Every route the gateway serves is described in `/v1/openapi.json`: routes are
//! registered only through `utoipa_axum::routes!`, which takes each from its handler's
//! `#[utoipa::path]`. A plain axum registration would serve a route the description
//! leaves out, so none may appear in the gateway's source but the one `/mcp` service
//! (rmcp's, described beside it in `mcp.rs`). tests/openapi.rs checks the other way: each
//! described operation is a route the running gateway answers.

use std::path::{Path, PathBuf};

/// The registrations that bypass the description.
const UNDESCRIBED: &[&str] = &[".route(", ".route_service(", ".nest(", ".nest_service("];

/// `(file, registration)` allowed: the MCP endpoint is a tower service, not a handler.
const ALLOWED: &[(&str, &str)] = &[("mcp.rs", ".nest_service(")];

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn no_route_is_registered_without_its_description() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 10, "the gateway's sources are under {src:?}");
    let mut offences = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // A file's unit tests may build routers of their own.
        let text = text.split("#[cfg(test)]").next().unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        for (number, line) in text.lines().enumerate() {
            for registration in UNDESCRIBED {
                if line.contains(registration) && !ALLOWED.contains(&(name.as_str(), registration))
                {
                    offences.push(format!(
                        "{}:{}: {}",
                        file.display(),
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "routes registered without a description (use `.routes(routes!(handler))` with a \
         `#[utoipa::path]` on the handler):\n{}",
        offences.join("\n")
    );
}
