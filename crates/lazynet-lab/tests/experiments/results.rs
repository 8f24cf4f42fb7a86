//! The committed result files: each `results/NAME/NAME.txt` says which
//! command, machine, commit and date made it, and none comes from a tree
//! with uncommitted changes (its figures would belong to no commit).

use std::path::Path;

#[test]
fn every_result_file_names_its_run_and_comes_from_a_clean_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results");
    let mut seen = 0;
    let mut bad = Vec::new();
    for dir in std::fs::read_dir(&root).expect("results/") {
        let dir = dir.unwrap().path();
        let Some(name) = dir.file_name().and_then(|n| n.to_str()).map(String::from) else {
            continue;
        };
        let txt = dir.join(format!("{name}.txt"));
        let Ok(text) = std::fs::read_to_string(&txt) else {
            bad.push(format!("{name}: no {name}.txt"));
            continue;
        };
        seen += 1;
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        for key in ["command:", "machine:", "date:"] {
            if field(key).is_none() {
                bad.push(format!("{name}: no `{key}` line"));
            }
        }
        match field("commit:") {
            None => bad.push(format!("{name}: no `commit:` line")),
            Some(c) if c.ends_with("-dirty") => {
                bad.push(format!("{name}: made from a tree with changes ({c})"))
            }
            Some(_) => {}
        }
    }
    assert!(
        seen >= 20,
        "only {seen} result files found under {}",
        root.display()
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
