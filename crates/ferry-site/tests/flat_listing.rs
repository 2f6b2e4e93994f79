//! A listing crosses the worker's socket flat: a tree deeper than a JSON parser's nesting
//! limit still arrives whole, and depths that describe no tree are refused.

use ferry_site::{FlatListing, Listing, Node, NodeKind};

fn folder(name: &str, children: Vec<Node>) -> Node {
    Node {
        name: name.to_owned(),
        path: format!("public/{name}"),
        kind: NodeKind::Dir,
        managed: false,
        size: None,
        mtime: "2026-12-01T00:00:00Z".to_owned(),
        children: Some(children),
    }
}

fn file(name: &str) -> Node {
    Node {
        kind: NodeKind::File,
        size: Some(1),
        children: None,
        ..folder(name, Vec::new())
    }
}

fn listing(entries: Vec<Node>) -> Listing {
    Listing {
        root: "public".to_owned(),
        project: None,
        entries,
        truncated: true,
    }
}

#[test]
fn a_tree_deeper_than_the_parser_allows_survives_the_trip() {
    let mut deep = vec![file("bottom.txt")];
    for level in 0..100 {
        deep = vec![
            folder(&format!("d{level}"), deep),
            file(&format!("f{level}")),
        ];
    }
    let tree = listing(vec![
        folder("empty", Vec::new()),
        deep.remove(0),
        deep.remove(0),
    ]);
    let expected = serde_json::to_value(&tree).unwrap();
    let wire = serde_json::to_vec(&tree.flatten()).unwrap();
    let flat: FlatListing = serde_json::from_slice(&wire).expect("a flat listing parses");
    let back = flat.into_tree().expect("the depths describe a tree");
    assert_eq!(serde_json::to_value(&back).unwrap(), expected);
}

#[test]
fn depths_that_describe_no_tree_are_refused() {
    let flat = |entries: Vec<(usize, Node)>| FlatListing {
        root: "public".to_owned(),
        project: None,
        entries,
        truncated: false,
    };
    // Two below the entry before it, or below a file, or first entry not at the top.
    assert!(
        flat(vec![(0, folder("a", vec![])), (2, file("x"))])
            .into_tree()
            .is_none()
    );
    assert!(
        flat(vec![(0, file("a")), (1, file("x"))])
            .into_tree()
            .is_none()
    );
    assert!(flat(vec![(1, file("x"))]).into_tree().is_none());
    // One below a folder, then back to the top: a tree.
    let tree = flat(vec![
        (0, folder("a", vec![])),
        (1, file("x")),
        (0, file("b")),
    ])
    .into_tree()
    .unwrap();
    assert_eq!(tree.entries.len(), 2);
    assert_eq!(tree.entries[0].children.as_ref().unwrap()[0].name, "x");
}
